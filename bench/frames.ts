// WebSocket frames as the load side reads them: headers only, payloads skipped (nothing decoded or copied).

/** Reads frame headers (server frames are unmasked) and skips payloads; `onFrame` gets each opcode. */
export function frameReader(onFrame: (opcode: number) => void): (chunk: Buffer) => void {
  let skip = 0;
  const head: number[] = [];
  return (chunk) => {
    let at = 0;
    while (at < chunk.length) {
      if (skip > 0) {
        const n = Math.min(skip, chunk.length - at);
        skip -= n;
        at += n;
        continue;
      }
      head.push(chunk[at++]!);
      if (head.length < 2) continue;
      const short = head[1]! & 0x7f;
      if (head.length < (short < 126 ? 2 : short === 126 ? 4 : 10)) continue;
      let length = short;
      if (short === 126) length = (head[2]! << 8) | head[3]!;
      else if (short === 127) length = head.slice(2, 10).reduce((n, b) => n * 256 + b, 0);
      onFrame(head[0]! & 0x0f);
      head.length = 0;
      skip = length;
    }
  };
}
