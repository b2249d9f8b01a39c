// Every unit test file of this folder, run in one ava worker: test/helpers/unit-suite.ts says why.
import './handler.test.js';
import './lock.test.js';
import './paths.test.js';
import './root.test.js';
import './session.test.js';
import './upkeep.test.js';
import { everyFileGathered } from '../../helpers/unit-suite.js';

everyFileGathered(import.meta.url);
