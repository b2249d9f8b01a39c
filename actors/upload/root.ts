import { isAbsolute, join, posix, relative, resolve } from 'node:path';
import { USER_NAME } from '../../bus/subjects.js';

/**
 * The upload root maps paths in an app's view onto the host (docs/protocol.md "Manifest"): every user
 * has their own folder, `<root>/<user>`, and an app's `/data/chat` is `<root>/<user>/data/chat`,
 * as on the platform where each user's volume is mounted at the same path in every app. Nothing
 * an app names can therefore leave its user's folder by text alone (`..` is collapsed first, so
 * `/../bob` stays under the user); what symlinks do is the job of `resolveTarget`.
 */
export class UploadRoot {
  constructor(readonly root: string) {
    if (!isAbsolute(root)) throw new Error(`upload root must be an absolute path: ${root}`);
  }

  userFolder(user: string): string {
    // Registry names already match this; a bus message that does not must not become a path.
    if (!USER_NAME.test(user)) throw new Error(`not a user name: ${JSON.stringify(user)}`);
    return join(this.root, user);
  }

  /** The host path of an absolute path in the app's view (collapsed so it cannot climb out by text). */
  hostPath(user: string, appPath: string): string {
    return resolve(this.userFolder(user), `.${posix.normalize(`/${appPath}`)}`);
  }

  /** The app's view of a host path under the user's folder (for events and anything apps read). */
  appPath(user: string, hostPath: string): string {
    const rel = relative(this.userFolder(user), hostPath);
    return `/${rel.split('\\').join('/')}`;
  }
}
