import test from 'ava';
import { ErrorReasons, PierError, type ErrorReason } from '../../../bus/errors.js';
import { TUS_ERRORS, TusRefusal, tusRefusal, tusRefusalOf, tusRefusalWith } from '../../../edge/upload/tus-errors.js';

// edge/upload/tus-errors.ts: the one table of tus refusals; the upload engine's refusals come by reason and are said here in tus words.

test('a refusal by name: its status and its text, with its figures filled in', (t) => {
  const r = tusRefusal('MAX_SIZE', 100);
  t.true(r instanceof TusRefusal);
  t.is(r.status, 413);
  t.is(r.message, 'Upload-Length: must be at most 100 bytes (Tus-Max-Size)');
  t.deepEqual(r.headers, {});
  const v = tusRefusalWith({ 'tus-version': '1.0.0' }, 'VERSION', '1.0.0');
  t.is(v.status, 412);
  t.is(v.message, 'Tus-Resumable: must be 1.0.0');
  t.deepEqual(v.headers, { 'tus-version': '1.0.0' });
  t.is(TUS_ERRORS.CHECKSUM_MISMATCH.status, 460);
});

test('the engine\'s reasons in tus words, exactly as tus clients were answered before the engine spoke by reason', (t) => {
  const said = (reason: ErrorReason, data?: unknown) => {
    const r = tusRefusalOf(new PierError('BAD_REQUEST', 'the engine\'s own words', { reason, data }));
    return r && { status: r.status, text: r.message, headers: r.headers };
  };
  t.deepEqual(said(ErrorReasons.UPLOAD_UNKNOWN), { status: 404, text: 'upload not found', headers: {} });
  t.deepEqual(said(ErrorReasons.OFFSET_MISMATCH, { offset: 5 }), { status: 409, text: "Upload-Offset: does not match the upload's offset", headers: { 'upload-offset': '5' } });
  t.deepEqual(said(ErrorReasons.OFFSET_MISMATCH), { status: 409, text: "Upload-Offset: does not match the upload's offset", headers: {} });
  t.deepEqual(said(ErrorReasons.CHECKSUM_MISMATCH), { status: 460, text: 'Upload-Checksum: the chunk does not match its checksum; nothing of it was kept', headers: {} });
  t.deepEqual(said(ErrorReasons.NOT_A_FILE), { status: 400, text: 'Upload-Metadata filename: must name a file, not a folder', headers: {} });
  t.deepEqual(said(ErrorReasons.PAST_LENGTH, { bytes: 100 }), { status: 400, text: "Upload-Length: the chunk goes past the upload's length (100 bytes)", headers: {} });
  t.deepEqual(said(ErrorReasons.PAST_MAX_SIZE, { bytes: 200 }), { status: 400, text: 'Upload-Length: the upload would pass the largest size allowed (200 bytes)', headers: {} });
  t.deepEqual(said(ErrorReasons.LENGTH_FIXED, { bytes: 7 }), { status: 400, text: "Upload-Length: the upload's length is 7 and cannot change", headers: {} });
  t.deepEqual(said(ErrorReasons.LENGTH_BELOW_OFFSET, { bytes: 3 }), { status: 400, text: 'Upload-Length: 3 bytes are already written', headers: {} });
  t.deepEqual(said(ErrorReasons.LENGTH_OVER_MAX, { bytes: 9 }), { status: 400, text: 'Upload-Length: must be at most 9 bytes', headers: {} });
});

test('a refusal without a reason, or without the figure its text needs (an older engine\'s), has no tus text here', (t) => {
  t.is(tusRefusalOf(new PierError('BAD_REQUEST', 'Upload-Length: the chunk goes past the upload\'s length (100 bytes)')), undefined);
  t.is(tusRefusalOf(new PierError('BAD_REQUEST', 'x', { reason: ErrorReasons.PAST_LENGTH })), undefined);
  t.is(tusRefusalOf(new PierError('CONFLICT', 'upload busy', { reason: ErrorReasons.UPLOAD_BUSY })), undefined);
});
