// Every unit test file of this folder, run in one ava worker: test/helpers/unit-suite.ts says why.
import './admin-api.test.js';
import './admin-host.test.js';
import './block-pool.test.js';
import './call-gate.test.js';
import './console-session.test.js';
import './gateway-delivery.test.js';
import './gateway-history.test.js';
import './gateway-host.test.js';
import './health.test.js';
import './history-off.test.js';
import './history-rights.test.js';
import './http-pieces.test.js';
import './local-api.test.js';
import './metrics-history.test.js';
import './multipart-memory.test.js';
import './multipart-views-limits.test.js';
import './multipart-views.test.js';
import './routes.test.js';
import './stream-chunks.test.js';
import './system-api.test.js';
import './tus-errors.test.js';
import './tus-headers.test.js';
import './upload-api.test.js';
import './upload-multipart-hostile.test.js';
import './vault-api.test.js';
import { everyFileGathered } from '../../helpers/unit-suite.js';

everyFileGathered(import.meta.url);
