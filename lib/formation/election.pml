/* Promela model of sprout's founder election (lib/formation/node.cc), checked with spin.
 *
 * Single-decree Paxos over the founding: a value is (origin ballot, member mask). Every
 * acceptor step is one atomic action on the acceptor's saved state, so any order of
 * these steps stands for any loss, duplication, delay and reordering of messages; a
 * proposer may give up at any point (timeout, crash) and retry in a higher round.
 * Acceptor state is never lost (it is persisted), unless FORGET is defined, which
 * lets one acceptor lose its state once: spin must then find a double founding.
 *
 * Safety: at most one value is ever accepted by a quorum under any ballot, and
 * every proposer that learns its value was chosen learns that same value.
 *
 * N is the number of control-plane nodes powered on; Q the quorum each one uses. The
 * rule of docs/formation.md makes Q a majority of M >= N (the Shoot's maximum, or the
 * static list), so N=4 with Q=3 is a site with one spare node beyond N=3 under M=4 or
 * M=5; N=4 with Q=2 is the old rule (a majority of the expected 3), which spin must
 * catch founding twice.
 */
#ifndef N
#define N 3
#endif
#ifndef R
#define R 2          /* rounds each candidate may try */
#endif
#ifndef T
#define T 4          /* candidacies in all, across all candidates: bounds the search */
#endif
#ifndef Q
#define Q (N / 2 + 1)  /* votes and acceptances a founding needs */
#endif
#define B (R * N + N) /* ballots are round * N + id, so 0 < N <= ballot < B */

#define BIT(x, j) (((x) >> (j)) & 1)
#define CNT(x) (BIT(x, 0) + BIT(x, 1) + BIT(x, 2) + BIT(x, 3) + BIT(x, 4) + BIT(x, 5) + BIT(x, 6))

byte promised[N];   /* the ballot each node's vote belongs to (0: none) */
byte acc_b[N];      /* ballot of the founding it accepted (0: none) */
byte acc_v[N];      /* that founding's identity: the ballot that created it */
byte acc_m[N];      /* that founding's member set */
byte accmask[B];    /* observer: which nodes ever accepted under each ballot */
byte chosen_v;      /* observer: the chosen founding, once a majority accepted it */
byte chosen_m;
byte founded;       /* observer: how many candidates learned their founding was chosen */
byte tries;         /* candidacies started so far */

inline observe_accept(bb, v, m) {
  accmask[bb] = accmask[bb] | (1 << j);
  if
  :: CNT(accmask[bb]) >= Q ->
     if
     :: chosen_v == 0 -> chosen_v = v; chosen_m = m
     :: else -> assert(chosen_v == v && chosen_m == m)
     fi
  :: else -> skip
  fi
}

proctype Candidate(byte id) {
  byte round = 1;
  byte b, g, a, hb, hv, hm, v, m, j;
  do
  :: round > R || tries >= T -> break
  :: atomic { round <= R && tries < T -> tries++ };
     b = round * N + id;
     round++;
     g = 0; a = 0; hb = 0; hv = 0; hm = 0;
     /* Phase 1: vote for itself first, then collect grants in any order. */
     atomic {
       if
       :: promised[id] <= b ->
          promised[id] = b; g = 1 << id;
          if :: acc_b[id] > hb -> hb = acc_b[id]; hv = acc_v[id]; hm = acc_m[id] :: else -> skip fi
       :: else -> goto retry
       fi
     }
     do
     :: atomic {
          select(j : 0 .. N - 1);
          if
          :: BIT(g, j) == 0 && promised[j] <= b ->
             promised[j] = b; g = g | (1 << j);
             if :: acc_b[j] > hb -> hb = acc_b[j]; hv = acc_v[j]; hm = acc_m[j] :: else -> skip fi
          :: else -> skip
          fi;
          j = 0   /* scratch: reset so it does not split states */
        }
     :: CNT(g) >= Q -> break
     :: goto retry   /* timed out, denied, or crashed */
     od;
     /* Phase 2: carry forward the highest accepted founding, else found with the voters. */
     if
     :: hb > 0 -> v = hv; m = hm
     :: else -> v = b; m = g
     fi;
     do
     :: atomic {
          select(j : 0 .. N - 1);
          if
          :: BIT(a, j) == 0 && promised[j] <= b ->
             promised[j] = b; acc_b[j] = b; acc_v[j] = v; acc_m[j] = m; a = a | (1 << j);
             observe_accept(b, v, m)
          :: else -> skip
          fi;
          j = 0
        }
     :: CNT(a) >= Q -> break
     :: goto retry
     od;
     /* Chosen: this candidate announces it; members start etcd with it. */
     atomic { assert(chosen_v == v && chosen_m == m); founded++ }
     break;
retry:
     skip;
     /* Forget the abandoned candidacy: only saved acceptor state carries over. */
     d_step { g = 0; a = 0; hb = 0; hv = 0; hm = 0; v = 0; m = 0; b = 0 }
  od;
  skip;
  d_step { g = 0; a = 0; hb = 0; hv = 0; hm = 0; v = 0; m = 0; b = 0; round = 0 }
}

#ifdef FORGET
active proctype Amnesia() {
  byte k;
  select(k : 0 .. N - 1);
  atomic { promised[k] = 0; acc_b[k] = 0; acc_v[k] = 0; acc_m[k] = 0 }
}
#endif

init {
  byte i;
  atomic {
    for (i : 0 .. N - 1) { run Candidate(i) }
  }
}
