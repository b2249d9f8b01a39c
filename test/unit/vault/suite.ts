// Every unit test file of this folder, run in one ava worker: test/helpers/unit-suite.ts says why.
import './audit-batch.test.js';
import './audit-record.test.js';
import './audit-retention.test.js';
import './bucket-view-format.test.js';
import './decoded-cache.test.js';
import './handler.test.js';
import './value-key-pool.test.js';
import './value-keys.test.js';
import './value-keys-hostile.test.js';
import './write-attempt.test.js';
import { everyFileGathered } from '../../helpers/unit-suite.js';

everyFileGathered(import.meta.url);
