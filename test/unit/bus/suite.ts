// Every unit test file of this folder, run in one ava worker: test/helpers/unit-suite.ts says why.
import './auth-conf-unchanged.test.js';
import './byte-stream.test.js';
import './channel-errors.test.js';
import './deadlines.test.js';
import './errors.test.js';
import './trace.test.js';
import './ids.test.js';
import './wire-format.test.js';
import './memory-routes.test.js';
import './permissions.test.js';
import './random-pool.test.js';
import './seal.test.js';
import './shared-endpoints.test.js';
import { everyFileGathered } from '../../helpers/unit-suite.js';

everyFileGathered(import.meta.url);
