/**
 * The platform's upload protocol (docs/upload.md) tells some outcomes apart by the text of its
 * envelope's `message` alone: its clients (the platform's own, Pier's chaos workload) can only
 * compare that text. Defined here once, byte for byte as the platform has them: Pier's own code
 * decides on the error's reason (bus/errors.ts `ErrorReasons`), never on these.
 */
export const UploadTexts = {
  INVALID_UPLOAD_ID: 'Invalid upload ID',
  INVALID_OFFSET: 'Invalid offset',
  UPLOADED: 'File uploaded successfully',
  CONTINUE: 'Continue uploading',
} as const;
