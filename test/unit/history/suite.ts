// Every unit test file of this folder, run in one ava worker: test/helpers/unit-suite.ts says why.
import './exchanges.test.js';
import './store.test.js';
import { everyFileGathered } from '../../helpers/unit-suite.js';

everyFileGathered(import.meta.url);
