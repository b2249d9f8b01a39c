/**
 * How a permission refusal from nats-server is logged. A reply refused is the server's
 * `allow_responses` at work, not a fault of this identity's lists: the server forgets the requests
 * a connection received when it reconnects, so an answer to one from before (whose requester has
 * timed out by then) is refused (docs/security.md "The bus"). Anything else is an identity fault.
 */
export interface RefusalLog {
  level: 'warn' | 'error';
  message: string;
}

export function refusalLog(operation: string, subject: string): RefusalLog {
  if (operation === 'publish' && subject.startsWith('_INBOX.')) return { level: 'warn', message: 'nats refused a reply: its request came before a reconnect or its answer came too late' };
  return { level: 'error', message: "nats refused an operation outside this identity's permissions" };
}
