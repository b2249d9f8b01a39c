/**
 * The one time scale of the tests (README "Tests"): every deadline a test gives work that should
 * finish — a wait, a request that should be answered, a gather that should hear everyone — is
 * `patience(ms)`, so a busy machine can be given more room at once with `PIER_TEST_TIME_SCALE`
 * (default 1; 3 gives three times as long). Deadlines are set far above what the work costs on an
 * idle machine (seconds for what takes milliseconds): reaching one is a failure, never a timing.
 *
 * A timer a test *expects to fire* (a request to nobody that must time out, a stall that must cut a
 * process that never answers) is not a deadline: it stays short and unscaled, and what it cuts is
 * held back for certain (a gate opened after the assertion), never merely slower.
 */
const asked = Number(process.env.PIER_TEST_TIME_SCALE ?? '1');
export const TIME_SCALE = Number.isFinite(asked) && asked >= 1 ? asked : 1;

/** A deadline of `ms` on an idle machine, as this run's scale stretches it. */
export const patience = (ms: number): number => Math.round(ms * TIME_SCALE);
