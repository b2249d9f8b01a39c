import test from 'ava';
import { GroupCommit } from '../../../lib/state/group-commit.js';

/** A commit held open until released: what a disk or a quorum does meanwhile. */
function heldCommits() {
  const commits: Array<{ items: number[]; release: (err?: unknown) => void }> = [];
  const commit = (items: number[]) =>
    new Promise<void>((resolve, reject) => {
      commits.push({ items, release: (err) => (err === undefined ? resolve() : reject(err)) });
    });
  return { commits, commit };
}

const settled = () => new Promise((r) => setImmediate(r));

test('what comes while a commit is in flight goes in the next one, together and in order; each caller is answered with its commit', async (t) => {
  const { commits, commit } = heldCommits();
  const group = new GroupCommit(commit);
  const answered: number[] = [];
  const first = group.add([1]).then(() => answered.push(1));
  const more = [group.add([2, 3]).then(() => answered.push(2)), group.add([4]).then(() => answered.push(4))];
  await settled();
  t.deepEqual(commits.map((c) => c.items), [[1]], 'the first commit holds the first caller alone');
  commits[0]!.release();
  await first;
  await settled();
  t.deepEqual(answered, [1], 'the others wait for their own commit');
  t.deepEqual(commits.map((c) => c.items), [[1], [2, 3, 4]], 'the callers that came meanwhile share one commit, in the order they came');
  commits[1]!.release();
  await Promise.all(more);
  t.deepEqual(answered, [1, 2, 4]);
});

test('a failed commit fails its own callers only; the next commit still goes', async (t) => {
  const { commits, commit } = heldCommits();
  const group = new GroupCommit(commit);
  const a = group.add([1]);
  const b = group.add([2]);
  await settled();
  commits[0]!.release(new Error('quorum lost'));
  await t.throwsAsync(a, { message: 'quorum lost' });
  await settled();
  commits[1]!.release();
  await t.notThrowsAsync(b);
});

test('hostile: a commit that throws at once, or rejects with nothing, rejects its callers and does not stop the group', async (t) => {
  let calls = 0;
  const group = new GroupCommit<number>((items) => {
    calls++;
    if (items[0] === 1) throw new Error('bug in the commit');
    if (items[0] === 2) return Promise.reject(undefined);
    return Promise.resolve();
  });
  await t.throwsAsync(group.add([1]), { message: 'bug in the commit' });
  await t.throwsAsync(group.add([2]), { message: 'group commit failed' });
  await t.notThrowsAsync(group.add([3]));
  t.is(calls, 3);
});

test('a commit takes whole callers up to its bound (a larger caller alone); nothing is split, nothing left behind', async (t) => {
  const { commits, commit } = heldCommits();
  const group = new GroupCommit(commit, 3);
  const all = [group.add([0]), group.add([1, 2]), group.add([3, 4]), group.add([5, 6, 7, 8]), group.add([9])];
  for (let i = 0; i < 5; i++) {
    await settled();
    commits[i]!.release();
  }
  await Promise.all(all);
  t.deepEqual(
    commits.map((c) => c.items),
    [[0], [1, 2], [3, 4], [5, 6, 7, 8], [9]],
    'two callers of 2 do not fit a bound of 3 together; the caller of 4 goes alone and whole',
  );
});

test('an empty add is answered at once and commits nothing', async (t) => {
  let calls = 0;
  const group = new GroupCommit<number>(async () => void calls++);
  await group.add([]);
  t.is(calls, 0);
});
