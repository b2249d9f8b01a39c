import test from 'ava';
import { MemoryBus } from '../../bus/bus-memory.js';
import { busContract } from './bus-suite.js';

// One in-process bus is one backend: publisher and subscriber are the same object.
const bus = new MemoryBus(() => undefined);
busContract(test, 'memory', async () => [bus, bus]);
