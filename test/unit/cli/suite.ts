// Every unit test file of this folder, run in one ava worker: test/helpers/unit-suite.ts says why.
import './bus-init-out.test.js';
import './bus-refusal.test.js';
import './help.test.js';
import './status-text.test.js';
import './printable.test.js';
import './usage-errors.test.js';
import { everyFileGathered } from '../../helpers/unit-suite.js';

everyFileGathered(import.meta.url);
