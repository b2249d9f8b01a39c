// Every unit test file of this folder, run in one ava worker: test/helpers/unit-suite.ts says why.
import './delivery-contract.test.js';
import './delivery-policy.test.js';
import './delivery-timeouts.test.js';
import './event-trace.test.js';
import './refusals.test.js';
import './takeover.test.js';
import './targets.test.js';
import './upload-notices.test.js';
import { everyFileGathered } from '../../helpers/unit-suite.js';

everyFileGathered(import.meta.url);
