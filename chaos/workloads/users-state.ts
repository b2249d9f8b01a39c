/** What the users workload keeps of its users, installs and access tokens (users.ts). */

export interface Token {
  token: string;
  fp: string;
}

export interface UserState {
  name: string;
  tokens: Token[];
  live: Token | null;
}

export interface Install {
  label: string;
  key: string;
  secret: string;
  ackAt: number;
}

export interface Access {
  token: string;
  fp: string;
  install: string;
  user: string;
  app: string;
}

export interface Slot {
  user: string;
  app: string;
  state: 'no' | 'yes' | 'maybe';
  installs: number;
  current: Install | null;
  access: Access | null;
}

export interface Shared {
  users: UserState[][];
  oldAccess: Access[];
  oldKeys: Array<{ install: Install; user: string; app: string; uninstalledAt: number }>;
  lastOldKey: number;
}
