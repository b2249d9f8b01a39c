"""The model of a disk with a volatile cache: what a power cut would keep (powercut/README.md).

The live tree is the backing directory itself; this module keeps, beside it, what is *durable*:

- per file inode, its durable content in `<state>/files/<ino>` (absent: empty), and the bytes
  written since its last sync as dirty ranges plus `tail_from`, the smallest size the file has had
  since then (every byte at or past it may differ from the durable copy, every byte below it and
  outside the dirty ranges is the same). An fsync copies only those bytes, not the whole file.
- per directory inode, its durable entries (name -> inode), next to its live ones. An fsync of the
  directory makes its durable entries equal to its live ones.
- cross-directory renames since the last fsync of either directory, in order. A rename lands whole
  (out of one directory and into the other at once, as a journal replays it) when either of its
  directories is fsync'd, together with every earlier pending rename: the durable tree stays a tree.
- with `journal` (lossyfs.py --journal), names as a journaling filesystem keeps them: a full fsync
  of anything (a file or a folder, not an fdatasync) commits every name change made before it, in
  every folder, as ext4's or XFS's one running journal transaction does. File data stays per file.

A cut rebuilds the backing directory from the durable tree. Inode numbers are this model's own,
never reused, and kept across a cut: what survives a cut keeps its inode number.
"""
import os
import shutil
import stat

ROOT = 1  # pyfuse3.ROOT_INODE


class Node:
    """A file, directory, symlink or special file, live or durable or both."""

    __slots__ = ('ino', 'kind', 'links', 'live', 'durable', 'mode', 'rdev', 'target', 'owner', 'dirty', 'tail_from', 'dsize', 'handles')

    def __init__(self, ino, kind, mode, rdev=0, target=None):
        self.ino = ino
        self.kind = kind  # 'dir' | 'file' | 'symlink' | 'special'
        self.links = set()  # live (parent ino, name); a directory has one, the root none
        self.live = {} if kind == 'dir' else None  # name -> ino
        self.durable = {} if kind == 'dir' else None  # name -> ino
        self.mode = mode  # durable permission bits (and type, for special files)
        self.owner = (0, 0)  # durable (uid, gid)
        self.rdev = rdev
        self.target = target  # a symlink's target: written once, durable with its entry
        self.dirty = []  # [start, end) byte ranges written since the last sync
        self.tail_from = 0  # every byte at or past this offset may differ from the durable copy
        self.dsize = 0  # the durable copy's size (its file is absent while this is 0 and nothing was synced)
        self.handles = set()  # open file handles (fh) on this inode


def merged(ranges):
    """Sorted, non-overlapping [start, end) ranges covering `ranges`."""
    out = []
    for a, b in sorted(ranges):
        if out and a <= out[-1][1]:
            if b > out[-1][1]:
                out[-1][1] = b
        else:
            out.append([a, b])
    return out


def copy_range(src, dst, offset, length):
    """Copies `length` bytes at `offset` from fd `src` to the same offset of fd `dst`."""
    end = offset + length
    while offset < end:
        try:
            n = os.copy_file_range(src, dst, end - offset, offset, offset)
        except OSError:
            n = os.pwrite(dst, os.pread(src, min(end - offset, 1 << 20), offset), offset)
        if n == 0:  # the source is shorter than asked: the rest reads as zeros
            break
        offset += n


class Durable:
    """The live tree's inodes and their durable state."""

    def __init__(self, root, state, journal=False):
        self.root = root  # bytes: the backing directory
        self.journal = journal  # a full fsync of anything commits every name change (commit_names)
        self.named = set()  # with journal: folders whose live entries changed since the last commit_names
        self.files = os.path.join(state, b'files')
        os.makedirs(self.files, exist_ok=True)
        self.nodes = {}
        self.moves = []  # pending cross-directory renames: (ino, src dir, src name, dst dir, dst name)
        self.next_ino = ROOT + 1

    # --- inodes and paths ---

    def new(self, kind, mode, rdev=0, target=None, ino=None):
        if ino is None:
            ino, self.next_ino = self.next_ino, self.next_ino + 1
        node = Node(ino, kind, mode, rdev, target)
        self.nodes[ino] = node
        return node

    def path(self, node):
        """The backing path of a live node, or None when it has no name any more (unlinked)."""
        parts = []
        while node.ino != ROOT:
            if not node.links:
                return None
            parent, name = next(iter(node.links))
            parts.append(name)
            node = self.nodes[parent]
        return os.path.join(self.root, *reversed(parts)) if parts else self.root

    def child_path(self, parent, name):
        base = self.path(parent)
        if base is None:
            raise FileNotFoundError(2, 'directory no longer exists')
        return os.path.join(base, name)

    def link(self, parent, name, node):
        parent.live[name] = node.ino
        node.links.add((parent.ino, name))
        if self.journal:
            self.named.add(parent.ino)

    def unlink(self, parent, name):
        if self.journal:
            self.named.add(parent.ino)
        ino = parent.live.pop(name, None)
        if ino is not None:
            self.nodes[ino].links.discard((parent.ino, name))
        return ino

    def shadow(self, ino):
        return os.path.join(self.files, str(ino).encode())

    # --- start: what is in the backing directory at mount is durable ---

    def scan(self):
        """Takes the backing directory as it is as durable, copying its files' contents."""
        st = os.lstat(self.root)
        root = self.new('dir', stat.S_IMODE(st.st_mode), ino=ROOT)
        root.owner = (st.st_uid, st.st_gid)
        seen = {}  # (st_dev, st_ino) of the backing -> node, for hard links
        todo = [root]
        while todo:
            d = todo.pop()
            base = self.path(d)
            for entry in os.scandir(base):
                name = os.fsencode(entry.name)
                st = entry.stat(follow_symlinks=False)
                node = seen.get((st.st_dev, st.st_ino)) if stat.S_ISREG(st.st_mode) else None
                if node is None:
                    node = self.adopt(os.path.join(base, name), st)
                    node.owner = (st.st_uid, st.st_gid)
                    seen[(st.st_dev, st.st_ino)] = node
                self.link(d, name, node)
                d.durable[name] = node.ino
                if node.kind == 'dir':
                    todo.append(node)

    def adopt(self, path, st):
        m = st.st_mode
        if stat.S_ISDIR(m):
            return self.new('dir', stat.S_IMODE(m))
        if stat.S_ISLNK(m):
            return self.new('symlink', 0o777, target=os.readlink(path))
        if stat.S_ISREG(m):
            node = self.new('file', stat.S_IMODE(m))
            shutil.copyfile(path, self.shadow(node.ino), follow_symlinks=False)
            node.tail_from = node.dsize = st.st_size
            return node
        return self.new('special', m, rdev=st.st_rdev)

    # --- file data ---

    def wrote(self, node, offset, length):
        last = node.dirty[-1] if node.dirty else None
        if last and offset <= last[1] and offset + length >= last[0]:  # the common case: appending, rewriting
            last[0], last[1] = min(last[0], offset), max(last[1], offset + length)
        else:
            node.dirty.append([offset, offset + length])
            if len(node.dirty) > 4096:
                node.dirty = merged(node.dirty)

    def resized(self, node, size):
        node.tail_from = min(node.tail_from, size)

    def sync_file(self, node, fd, metadata):
        """fsync/fdatasync: the durable copy becomes the live file (only what changed is copied)."""
        st = os.fstat(fd)
        size = st.st_size
        if metadata:
            node.mode, node.owner = stat.S_IMODE(st.st_mode), (st.st_uid, st.st_gid)
        if not node.dirty and node.tail_from >= size and node.dsize == size:
            return
        sfd = os.open(self.shadow(node.ino), os.O_RDWR | os.O_CREAT, 0o600)
        try:
            if os.fstat(sfd).st_size != size:
                os.ftruncate(sfd, size)
            tail = min(node.tail_from, size)
            for a, b in merged(node.dirty):
                a, b = min(a, tail), min(b, tail)
                if b > a:
                    copy_range(fd, sfd, a, b - a)
            if size > tail:
                copy_range(fd, sfd, tail, size - tail)
        finally:
            os.close(sfd)
        node.dirty = []
        node.tail_from = node.dsize = size

    def sync_range(self, node, fd, offset, length):
        """A write through an O_SYNC/O_DSYNC handle: that range, and the size it needs, are durable."""
        sfd = os.open(self.shadow(node.ino), os.O_RDWR | os.O_CREAT, 0o600)
        try:
            if node.dsize < offset + length:
                os.ftruncate(sfd, offset + length)
                node.dsize = offset + length
            copy_range(fd, sfd, offset, length)
        finally:
            os.close(sfd)
        end, rest = offset + length, []
        for a, b in node.dirty:
            if a < offset:
                rest.append([a, min(b, offset)])
            if b > end:
                rest.append([max(a, end), b])
        node.dirty = rest

    # --- namespace ---

    def moved(self, ino, src, src_name, dst, dst_name):
        if src != dst:
            self.moves.append((ino, src, src_name, dst, dst_name))

    def sync_dir(self, d, st):
        """fsync of a directory: its durable entries become its live ones (renames land whole)."""
        last = max((i for i, m in enumerate(self.moves) if m[1] == d.ino or m[3] == d.ino), default=-1)
        for ino, src, src_name, dst, dst_name in self.moves[:last + 1]:
            if self.nodes[src].durable.get(src_name) == ino:
                del self.nodes[src].durable[src_name]
            self.nodes[dst].durable[dst_name] = ino
        del self.moves[:last + 1]
        d.durable = dict(d.live)
        if st is not None:  # fsync, not fdatasync: the folder's own mode and owner too
            d.mode, d.owner = stat.S_IMODE(st.st_mode), (st.st_uid, st.st_gid)

    def commit_names(self):
        """With `journal`, a full fsync: every folder's durable entries become its live ones (a journal commit)."""
        if not self.journal:
            return
        for ino in self.named:
            d = self.nodes.get(ino)
            if d is not None:
                d.durable = dict(d.live)
        self.named.clear()
        self.moves = []  # landed: both sides of each are among the folders just committed

    # --- the cut ---

    def durable_tree(self):
        """(node, [(parent, name)...]) for every node reachable from the root over durable entries."""
        links = {ROOT: []}
        order = [self.nodes[ROOT]]
        for d in order:  # grows as directories are found: breadth first
            if d.kind != 'dir':
                continue
            for name, ino in sorted(d.durable.items()):
                child = self.nodes[ino]
                if ino in links and child.kind == 'dir':
                    continue  # cannot happen (renames land whole); a directory keeps one name
                if ino not in links:
                    links[ino] = []
                    order.append(child)
                links[ino].append((d.ino, name))
        return order, links

    def cut(self):
        """Drops every unsynced write and namespace change: the backing becomes the durable tree."""
        order, links = self.durable_tree()
        for entry in os.scandir(self.root):
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path)
            else:
                os.unlink(entry.path)
        for node in order:
            node.links = set(links[node.ino])
            if node.kind == 'dir':
                node.live = dict(node.durable)
            node.dirty = []
            if node.ino == ROOT:
                os.chmod(self.root, node.mode)
                os.chown(self.root, *node.owner)
                continue
            first, *more = [os.path.join(self.path(self.nodes[p]), n) for p, n in links[node.ino]]
            self.materialize(node, first)
            os.lchown(first, *node.owner)
            for path in more:
                os.link(first, path)
        dropped = [ino for ino in self.nodes if ino not in links]
        for ino in dropped:
            if self.nodes.pop(ino).kind == 'file' and os.path.exists(self.shadow(ino)):
                os.unlink(self.shadow(ino))
        self.moves = []
        self.named.clear()
        return {'kept': len(order), 'dropped': len(dropped)}

    def materialize(self, node, path):
        if node.kind == 'dir':
            os.mkdir(path, node.mode)
        elif node.kind == 'symlink':
            os.symlink(node.target, path)
        elif node.kind == 'special':
            os.mknod(path, node.mode, node.rdev)
        else:
            shadow = self.shadow(node.ino)
            if os.path.exists(shadow):
                shutil.copyfile(shadow, path)
            else:
                open(path, 'wb').close()
            os.chmod(path, node.mode)
            node.tail_from = node.dsize = os.lstat(path).st_size

    def discard(self):
        shutil.rmtree(self.files, ignore_errors=True)
