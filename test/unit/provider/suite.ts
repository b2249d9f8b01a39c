// Every unit test file of this folder, run in one ava worker: test/helpers/unit-suite.ts says why.
import './headers-and-checks.test.js';
import './provider-series.test.js';
import './upstream-answers.test.js';
import './upstream-errors.test.js';
import { everyFileGathered } from '../../helpers/unit-suite.js';

everyFileGathered(import.meta.url);
