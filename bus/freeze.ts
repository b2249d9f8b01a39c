/**
 * Freezes a value and everything it holds (objects and arrays; byte arrays cannot be frozen and
 * are left as they are). The in-process bus does this to what it passes by reference when
 * PIER_FREEZE_SHARED=1 (the tests set it): a handler or caller that changes a value it shares with
 * the other side then throws where it does so, instead of corrupting the other side quietly.
 */
export function freezeDeep<T>(value: T): T {
  if (value === null || typeof value !== 'object' || Object.isFrozen(value) || ArrayBuffer.isView(value)) return value;
  Object.freeze(value);
  for (const inner of Object.values(value)) freezeDeep(inner);
  return value;
}
