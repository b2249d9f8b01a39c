// Every unit test file of this folder, run in one ava worker: test/helpers/unit-suite.ts says why.
import './old-release.test.js';
import './processes-check.test.js';
import './run-folder.test.js';
import './upgrade-history.test.js';
import './value-keys-check.test.js';
import './vault-shred-check.test.js';
import './worktree.test.js';
import './upload-check.test.js';
import './users-check.test.js';
import './vault-check.test.js';
import './ws-check.test.js';
import './ws-recovery-check.test.js';
import { everyFileGathered } from '../../helpers/unit-suite.js';

everyFileGathered(import.meta.url);
