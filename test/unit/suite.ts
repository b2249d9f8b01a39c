// Every unit test file of this folder, run in one ava worker: test/helpers/unit-suite.ts says why.
import './docs-citations.test.js';
import './docs-commands.test.js';
import './docs-reference.test.js';
import './layers.test.js';
import './registry-cache.test.js';
import { everyFileGathered } from '../helpers/unit-suite.js';

everyFileGathered(import.meta.url);
