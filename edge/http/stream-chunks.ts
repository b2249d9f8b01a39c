import { finished, type Readable } from 'node:stream';

/**
 * A readable's chunks one by one, as they were pushed. `for await` over a readable calls `read()`,
 * which joins everything buffered into one new buffer (a copy of up to the stream's high-water
 * mark per step); on an upload that copy is a second pass over every byte and most of the garbage.
 * Here the stream flows and each chunk is handed on as it is; at most `ahead` chunks wait, beyond
 * that the stream is paused, so memory stays bounded when the consumer is slower than the source.
 * An error or a premature close of the stream is thrown to the consumer.
 */
export async function* chunksOf(stream: Readable, ahead = 4): AsyncGenerator<Buffer> {
  const queue: Buffer[] = [];
  let over = false;
  let failure: Error | null = null;
  let wake: (() => void) | null = null;
  const poke = () => {
    wake?.();
    wake = null;
  };
  const onData = (chunk: Buffer) => {
    queue.push(chunk);
    if (queue.length >= ahead) stream.pause();
    poke();
  };
  stream.on('data', onData);
  const stopWatching = finished(stream, (err) => {
    over = true;
    failure = err ?? null;
    poke();
  });
  try {
    for (;;) {
      const chunk = queue.shift();
      if (chunk !== undefined) {
        if (queue.length < ahead && stream.isPaused() && !over) stream.resume();
        yield chunk;
        continue;
      }
      if (failure) throw failure;
      if (over) return;
      await new Promise<void>((resolve) => (wake = resolve));
    }
  } finally {
    stream.off('data', onData);
    stopWatching();
  }
}
