"""The command socket of lossyfs: the harness's way to cut the power (README.md, "Commands")."""
import json

import pyfuse3
import trio


class Control:
    """One connection, one command line, one answer line; the socket stays for the next."""

    def __init__(self, ops, path):
        self.ops, self.path = ops, path

    async def serve(self, task_status=trio.TASK_STATUS_IGNORED):
        sock = trio.socket.socket(trio.socket.AF_UNIX, trio.socket.SOCK_STREAM)
        await sock.bind(self.path)
        sock.listen(8)
        task_status.started()
        async with trio.open_nursery() as nursery:
            while True:
                conn, _ = await sock.accept()
                nursery.start_soon(self.answer, trio.SocketStream(conn))

    async def answer(self, stream):
        async with stream:
            line = b''
            while not line.endswith(b'\n'):
                chunk = await stream.receive_some(4096)
                if not chunk:
                    break
                line += chunk
            try:
                reply = 'ok ' + json.dumps(await self.command(line.decode().split()))
            except Exception as e:  # the reason goes back to the caller, the daemon keeps serving
                reply = f'error {e}'
            await stream.send_all(reply.encode() + b'\n')

    def open_files(self):
        return sorted({(self.ops.model.path(h.node) or b'(unlinked)').decode(errors='replace') for h in self.ops.handles.values()})

    async def command(self, words):
        if not words:
            raise ValueError('empty command (have: cut [WAIT_MS], status)')
        if words[0] == 'status':
            m = self.ops.model
            return {'open': self.open_files(), 'dirtyFiles': sum(1 for n in m.nodes.values() if n.dirty or (n.kind == 'file' and n.tail_from < n.dsize)), 'pendingRenames': len(m.moves), 'inodes': len(m.nodes)}
        if words[0] == 'cut':
            wait_ms = int(words[1]) if len(words) > 1 else 0
            with trio.move_on_after(wait_ms / 1000):
                while self.ops.handles:  # a killed process's files are released by the kernel shortly after
                    await trio.sleep(0.01)
            if self.ops.handles:
                raise RuntimeError(f'cut refused: {len(self.ops.handles)} file(s) still open on the mount after {wait_ms} ms ({", ".join(self.open_files())}); stop every process using it first')
            result = self.ops.model.cut()
            await trio.to_thread.run_sync(self.invalidate)
            return result
        raise ValueError(f'unknown command {words[0]!r} (have: cut [WAIT_MS], status)')

    def invalidate(self):
        # Names are never cached (entry_timeout 0); attributes and pages of what survived may be.
        for ino in list(self.ops.model.nodes):
            try:
                pyfuse3.invalidate_inode(ino)
            except OSError:
                pass  # not known to the kernel
