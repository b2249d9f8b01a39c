// Every unit test file of this folder, run in one ava worker: test/helpers/unit-suite.ts says why.
import './actor.test.js';
import './address-policy.test.js';
import './app-secrets.test.js';
import './applied-sequence.test.js';
import './callback-target.test.js';
import './config.test.js';
import './crypto.test.js';
import './durable-files.test.js';
import './gc-threads.test.js';
import './js-error.test.js';
import './lmdb-durable.test.js';
import './master-key-check.test.js';
import './nats-durability.test.js';
import './peers.test.js';
import './peers-all-speak.test.js';
import './peers-goodbye.test.js';
import './peers-proof.test.js';
import './presence.test.js';
import './record-format.test.js';
import './record-readers.test.js';
import './retry-while-starting.test.js';
import './start-watch.test.js';
import './stream-follower.test.js';
import './trace-config.test.js';
import './wire-window.test.js';
import { everyFileGathered } from '../../helpers/unit-suite.js';

everyFileGathered(import.meta.url);
