// Every unit test file of this folder, run in one ava worker: test/helpers/unit-suite.ts says why.
import './dest-nesting.test.js';
import './handler.test.js';
import './install-dest.test.js';
import './manifest.test.js';
import './provider-doc.test.js';
import { everyFileGathered } from '../../helpers/unit-suite.js';

everyFileGathered(import.meta.url);
