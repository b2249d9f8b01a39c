#!/usr/bin/python3
"""lossyfs: a FUSE passthrough that behaves like a disk with a volatile cache (powercut/README.md).

    /usr/bin/python3 powercut/lossyfs.py BACKING MOUNTPOINT --state DIR [--trace] [--journal]

Mounts BACKING at MOUNTPOINT. Reads see everything; what a power cut keeps is only what was
synced (durable.py). Commands, one line each on the unix socket DIR/control.sock, one line back
(`ok {json}` or `error <reason>`):

    cut [WAIT_MS]  drop every unsynced write and namespace change (waits up to WAIT_MS, default 0,
                   for open files to be closed; refuses, naming them, if some still are)
    status         {"open": [backing paths of open files], "dirtyFiles": n, "pendingRenames": n, "inodes": n}

SIGTERM or SIGINT unmounts (a clean shutdown: the live tree stays in BACKING) and removes DIR's
durable copies. Prints `ready` on stdout once mounted and listening.
"""
import argparse
import errno
import os
import signal
import stat
import sys
import traceback

try:
    import pyfuse3
    import trio
except ImportError as e:
    sys.exit(f"lossyfs: {sys.executable} cannot import {e.name} (Debian's python3-pyfuse3: as root, `npm test` installs it; or `apt-get install -y python3-pyfuse3`)")

from control import Control
from durable import Durable

SYNC_FLAGS = os.O_SYNC | os.O_DSYNC
# The backing file is opened read-write whatever the caller asked (the kernel checks the caller's
# rights), never O_APPEND (the kernel gives the offset; pwrite on an O_APPEND fd ignores it), never
# synchronous (durability is this model's, not the backing disk's).
DROPPED_FLAGS = os.O_ACCMODE | os.O_APPEND | SYNC_FLAGS | os.O_DIRECT | os.O_CREAT | os.O_EXCL | os.O_TRUNC


def fuse_errors(fn):
    """An OSError of the backing becomes the same errno to the caller; a bug here an EIO and a traceback."""
    async def wrapped(*args):
        try:
            return fn(*args)
        except pyfuse3.FUSEError:
            raise
        except OSError as e:
            raise pyfuse3.FUSEError(e.errno or errno.EIO) from None
        except Exception:  # the mount stays up (a dead one would let writes reach the folder beneath)
            traceback.print_exc(file=sys.stderr)
            raise pyfuse3.FUSEError(errno.EIO) from None
    wrapped.__name__ = fn.__name__
    return wrapped


class Handle:
    __slots__ = ('node', 'fd', 'sync', 'synced_by_write')

    def __init__(self, node, fd, flags):
        self.node, self.fd = node, fd
        self.sync = bool(flags & SYNC_FLAGS)
        self.synced_by_write = False  # an O_(D)SYNC write's own fsync from the kernel is still to come


class LossyOps(pyfuse3.Operations):
    supports_dot_lookup = True
    enable_writeback_cache = False  # writes reach the daemon at write(2), as the model needs

    def __init__(self, model, trace):
        super().__init__()
        self.model = model
        self.trace = trace
        self.handles = {}
        self.next_fh = 1

    def node(self, ino):
        node = self.model.nodes.get(ino)
        if node is None:
            raise pyfuse3.FUSEError(errno.ESTALE)  # dropped by a cut
        return node

    def log(self, *what):
        if self.trace:
            print('lossyfs:', *what, file=sys.stderr, flush=True)

    def attrs(self, node, st=None):
        if st is None:
            path = self.model.path(node)
            if path is None and not node.handles:
                raise pyfuse3.FUSEError(errno.ENOENT)
            st = os.lstat(path) if path is not None else os.fstat(self.handles[next(iter(node.handles))].fd)
        e = pyfuse3.EntryAttributes()
        e.st_ino = node.ino
        e.generation = 0
        e.entry_timeout = 0  # names are looked up again every time: a cut may change any of them
        e.attr_timeout = 0
        for f in ('st_mode', 'st_nlink', 'st_uid', 'st_gid', 'st_rdev', 'st_size', 'st_blksize', 'st_blocks', 'st_atime_ns', 'st_mtime_ns', 'st_ctime_ns'):
            setattr(e, f, getattr(st, f))
        return e

    def child(self, parent_ino, name):
        parent = self.node(parent_ino)
        ino = parent.live.get(name)
        if ino is None:
            raise pyfuse3.FUSEError(errno.ENOENT)
        return parent, self.model.nodes[ino]

    def created(self, parent, name, kind, ctx, **kw):
        path = self.model.child_path(parent, name)
        st = os.lstat(path)
        os.lchown(path, ctx.uid, ctx.gid)
        node = self.model.new(kind, stat.S_IMODE(st.st_mode) if kind != 'special' else st.st_mode, **kw)
        node.owner = (ctx.uid, ctx.gid)
        self.model.link(parent, name, node)
        self.log('create', path, kind, node.ino)
        return node

    # --- names ---

    @fuse_errors
    def lookup(self, parent_ino, name, ctx):
        parent = self.node(parent_ino)
        if name == b'.':
            return self.attrs(parent)
        if name == b'..':
            return self.attrs(self.model.nodes[next(iter(parent.links))[0]] if parent.links else parent)
        return self.attrs(self.child(parent_ino, name)[1])

    @fuse_errors
    def getattr(self, ino, ctx):
        return self.attrs(self.node(ino))

    @fuse_errors
    def setattr(self, ino, attr, fields, fh, ctx):
        node = self.node(ino)
        target = self.handles[fh].fd if fh is not None else self.model.path(node)
        if target is None:
            raise pyfuse3.FUSEError(errno.ENOENT)
        if fields.update_size:
            os.truncate(target, attr.st_size)
            self.model.resized(node, attr.st_size)
        if fields.update_mode:
            os.chmod(target, stat.S_IMODE(attr.st_mode))
        by_path = {} if fh is not None else {'follow_symlinks': False}
        if fields.update_uid or fields.update_gid:
            os.chown(target, attr.st_uid if fields.update_uid else -1, attr.st_gid if fields.update_gid else -1, **by_path)
        if fields.update_atime or fields.update_mtime:
            st = os.stat(target, **by_path)
            times = (attr.st_atime_ns if fields.update_atime else st.st_atime_ns, attr.st_mtime_ns if fields.update_mtime else st.st_mtime_ns)
            os.utime(target, ns=times, **by_path)
        return self.attrs(node)

    @fuse_errors
    def readlink(self, ino, ctx):
        return self.node(ino).target

    @fuse_errors
    def mknod(self, parent_ino, name, mode, rdev, ctx):
        parent = self.node(parent_ino)
        os.mknod(self.model.child_path(parent, name), mode, rdev)
        kind = 'file' if stat.S_ISREG(mode) else 'special'
        return self.attrs(self.created(parent, name, kind, ctx, rdev=rdev))

    @fuse_errors
    def mkdir(self, parent_ino, name, mode, ctx):
        parent = self.node(parent_ino)
        os.mkdir(self.model.child_path(parent, name), mode)
        return self.attrs(self.created(parent, name, 'dir', ctx))

    @fuse_errors
    def symlink(self, parent_ino, name, target, ctx):
        parent = self.node(parent_ino)
        os.symlink(target, self.model.child_path(parent, name))
        return self.attrs(self.created(parent, name, 'symlink', ctx, target=target))

    @fuse_errors
    def link(self, ino, parent_ino, name, ctx):
        node, parent = self.node(ino), self.node(parent_ino)
        source = self.model.path(node)
        if source is None:
            raise pyfuse3.FUSEError(errno.ENOENT)
        os.link(source, self.model.child_path(parent, name), follow_symlinks=False)
        self.model.link(parent, name, node)
        return self.attrs(node)

    @fuse_errors
    def unlink(self, parent_ino, name, ctx):
        parent, _ = self.child(parent_ino, name)
        os.unlink(self.model.child_path(parent, name))
        self.model.unlink(parent, name)

    @fuse_errors
    def rmdir(self, parent_ino, name, ctx):
        parent, _ = self.child(parent_ino, name)
        os.rmdir(self.model.child_path(parent, name))
        self.model.unlink(parent, name)

    @fuse_errors
    def rename(self, old_ino, old_name, new_ino, new_name, flags, ctx):
        old, moved = self.child(old_ino, old_name)
        new = self.node(new_ino)
        src, dst = self.model.child_path(old, old_name), self.model.child_path(new, new_name)
        other = new.live.get(new_name)
        if other == moved.ino:
            return  # two names of one file: rename(2) does nothing
        if flags & pyfuse3.RENAME_NOREPLACE and other is not None:
            raise pyfuse3.FUSEError(errno.EEXIST)
        if flags & pyfuse3.RENAME_EXCHANGE:
            if other is None:
                raise pyfuse3.FUSEError(errno.ENOENT)
            renameat2(src, dst, flags)
            self.model.unlink(old, old_name)
            self.model.unlink(new, new_name)
            self.model.link(new, new_name, moved)
            self.model.link(old, old_name, self.model.nodes[other])
            self.model.moved(moved.ino, old.ino, old_name, new.ino, new_name)
            self.model.moved(other, new.ino, new_name, old.ino, old_name)
            return
        os.rename(src, dst)
        self.model.unlink(old, old_name)
        self.model.unlink(new, new_name)
        self.model.link(new, new_name, moved)
        self.model.moved(moved.ino, old.ino, old_name, new.ino, new_name)
        self.log('rename', src, dst)

    # --- files ---

    def opened(self, node, fd, flags):
        fh, self.next_fh = self.next_fh, self.next_fh + 1
        self.handles[fh] = Handle(node, fd, flags)
        node.handles.add(fh)
        fi = pyfuse3.FileInfo(fh=fh)
        fi.keep_cache = False  # the page cache is dropped at every open: a cut changes contents
        fi.direct_io = False  # mmap must work (LMDB maps its data file)
        return fi

    @fuse_errors
    def open(self, ino, flags, ctx):
        node = self.node(ino)
        path = self.model.path(node)
        if path is None:
            raise pyfuse3.FUSEError(errno.ENOENT)
        fd = os.open(path, (flags & ~DROPPED_FLAGS) | os.O_RDWR | os.O_NOFOLLOW)
        if flags & os.O_TRUNC:
            os.ftruncate(fd, 0)
            self.model.resized(node, 0)
        return self.opened(node, fd, flags)

    @fuse_errors
    def create(self, parent_ino, name, mode, flags, ctx):
        parent = self.node(parent_ino)
        fd = os.open(self.model.child_path(parent, name), (flags & ~DROPPED_FLAGS) | os.O_RDWR | os.O_CREAT | os.O_EXCL, mode)
        node = self.created(parent, name, 'file', ctx)
        return self.opened(node, fd, flags), self.attrs(node, os.fstat(fd))

    @fuse_errors
    def read(self, fh, off, size):
        return os.pread(self.handles[fh].fd, size, off)

    @fuse_errors
    def write(self, fh, off, buf):
        h = self.handles[fh]
        n = os.pwrite(h.fd, buf, off)
        self.model.wrote(h.node, off, n)
        if h.sync:
            self.model.sync_range(h.node, h.fd, off, n)
            h.synced_by_write = True
            self.log('write', self.model.path(h.node), off, n, 'O_(D)SYNC: synced')
        return n

    @fuse_errors
    def flush(self, fh):
        pass

    @fuse_errors
    def release(self, fh):
        h = self.handles.pop(fh)
        h.node.handles.discard(fh)
        os.close(h.fd)

    @fuse_errors
    def fsync(self, fh, datasync):
        h = self.handles[fh]
        if h.synced_by_write:
            # The kernel follows every write through an O_SYNC/O_DSYNC file with an fsync of that
            # file (generic_write_sync), and FUSE's fsync carries no range: that fsync is the write's
            # own, already done for its range in write(); syncing the whole file here would make
            # durable what the caller never synced.
            h.synced_by_write = False
            self.log('fsync', self.model.path(h.node), 'of an O_(D)SYNC write: done at the write')
        else:
            self.model.sync_file(h.node, h.fd, metadata=not datasync)
            self.log('fsync', self.model.path(h.node), 'data' if datasync else 'all')
        if not datasync:
            self.model.commit_names()

    # --- directories ---

    @fuse_errors
    def opendir(self, ino, ctx):
        if self.node(ino).kind != 'dir':
            raise pyfuse3.FUSEError(errno.ENOTDIR)
        return ino

    async def readdir(self, ino, start_id, token):
        node = self.model.nodes.get(ino)
        if node is None:
            return
        # Offsets are inode numbers, which never repeat: an entry added or removed during a listing
        # makes no other entry appear twice or be skipped.
        for child_ino, name in sorted((i, n) for n, i in node.live.items() if i > start_id):
            try:
                attrs = self.attrs(self.model.nodes[child_ino], os.lstat(self.model.child_path(node, name)))
            except OSError:
                continue
            if not pyfuse3.readdir_reply(token, name, attrs, child_ino):
                break

    @fuse_errors
    def releasedir(self, fh):
        pass

    @fuse_errors
    def fsyncdir(self, ino, datasync):
        node = self.node(ino)
        self.model.sync_dir(node, None if datasync else os.lstat(self.model.path(node)))
        if not datasync:
            self.model.commit_names()
        self.log('fsyncdir', self.model.path(node))

    @fuse_errors
    def statfs(self, ctx):
        st, out = os.statvfs(self.model.root), pyfuse3.StatvfsData()
        for f in ('f_bsize', 'f_frsize', 'f_blocks', 'f_bfree', 'f_bavail', 'f_files', 'f_ffree', 'f_favail', 'f_namemax'):
            setattr(out, f, getattr(st, f))
        return out

    @fuse_errors
    def access(self, ino, mode, ctx):
        self.node(ino)
        return True

    def forget(self, inode_list):
        pass  # inodes live as long as they are live or durable, not as long as the kernel knows them


def renameat2(src, dst, flags):
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.renameat2(-100, src, -100, dst, flags) != 0:  # AT_FDCWD
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))


async def run(ops, control):
    async with trio.open_nursery() as nursery:
        async def fuse():
            await pyfuse3.main()
            nursery.cancel_scope.cancel()  # unmounted from outside (umount)

        async def signals():
            with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as received:
                async for _ in received:
                    nursery.cancel_scope.cancel()

        await nursery.start(control.serve)
        nursery.start_soon(signals)
        nursery.start_soon(fuse)
        print('ready', flush=True)


def main():
    p = argparse.ArgumentParser(description='A FUSE passthrough that loses what was not synced, on command.')
    p.add_argument('backing')
    p.add_argument('mountpoint')
    p.add_argument('--state', required=True, help='a directory of its own for the durable copies and control.sock')
    p.add_argument('--trace', action='store_true', help='log namespace changes and syncs to stderr')
    p.add_argument('--journal', action='store_true', help='names as a journaling filesystem (ext4, XFS) keeps them: a full fsync of anything commits every name change before it')
    a = p.parse_args()
    os.umask(0)  # the kernel applied the caller's umask to every mode it sends
    os.makedirs(a.state, exist_ok=True)
    sock = os.path.join(a.state, 'control.sock')
    if os.path.exists(sock):
        os.unlink(sock)
    model = Durable(os.fsencode(os.path.abspath(a.backing)), os.fsencode(os.path.abspath(a.state)), journal=a.journal)
    model.scan()
    ops = LossyOps(model, a.trace)
    options = set(pyfuse3.default_options) | {'fsname=lossyfs', 'subtype=lossyfs'}
    try:
        pyfuse3.init(ops, a.mountpoint, options)
    except RuntimeError as e:
        print(f'lossyfs: cannot mount {a.mountpoint}: {e}', file=sys.stderr)
        sys.exit(1)
    try:
        trio.run(run, ops, Control(ops, sock))
    finally:
        pyfuse3.close(unmount=True)
        model.discard()
        if os.path.exists(sock):
            os.unlink(sock)


if __name__ == '__main__':
    main()
