import bcrypt from 'bcryptjs';

/** Runs in a worker thread (piscina): one bcrypt comparison, off the event loop. */
export default function compare({ plain, hash }: { plain: string; hash: string }): boolean {
  return bcrypt.compareSync(plain, hash);
}
