--------------------- MODULE AckOrderFailoverFunctions ---------------------
(***************************************************************************)
(* Pure helpers of the failover spec: epoch-cache operations              *)
(* (EpochFileCache), the handshake's consistent point, the ack rule and    *)
(* confirmOffset.                                                          *)
(***************************************************************************)
EXTENDS AckOrderFailoverTypes, Integers

Min(a, b) == IF a < b THEN a ELSE b
Max(a, b) == IF a > b THEN a ELSE b
SetMin(S) == CHOOSE x \in S : \A y \in S : x <= y
SetMax(S) == CHOOSE x \in S : \A y \in S : x >= y

Alive(b) == up[b] /\ reachable[b]   \* what the controller's heartbeat manager sees

(***************************************************************************)
(* EpochFileCache (EFC).  Entries are kept in epoch order.  appendEntry    *)
(* refuses an entry whose epoch is not above the last one, or whose start  *)
(* offset is below the last one's (E1).  RocketMQ also refuses an EQUAL    *)
(* start offset, i.e. a new epoch right after one in which this broker    *)
(* wrote nothing; the model keeps such an entry (the empty epoch then ends *)
(* where it starts), see docs/model.md "What the model does differently". *)
(***************************************************************************)
LastEpoch(c) == IF c = <<>> THEN 0 ELSE c[Len(c)][1]
LastStart(c) == IF c = <<>> THEN 0 ELSE c[Len(c)][2]

AppendEntry(c, e) ==
    IF \/ BugEpochAppendUnchecked
       \/ c = <<>>
       \/ e[1] > LastEpoch(c) /\ e[2] >= LastStart(c)
    THEN Append(c, e) ELSE c

TruncateSuffixByOffset(c, o) == SelectSeq(c, LAMBDA e : e[2] < o)
TruncateSuffixByEpoch(c, ep) == SelectSeq(c, LAMBDA e : e[1] < ep)
TruncateBeyond(c, o)         == SelectSeq(c, LAMBDA e : e[2] <= o)

\* The entry covering offset o: the last one starting at or before o (an
\* empty epoch, followed by one with the same start, covers nothing).
CoveringIndex(c, o) ==
    LET ks == {k \in DOMAIN c : c[k][2] <= o}
    IN IF ks = {} THEN 0 ELSE SetMax(ks)

EpochAt(c, o) == LET k == CoveringIndex(c, o) IN IF k = 0 THEN 0 ELSE c[k][1]

\* Where entry k ends: the next entry's start, or the log end for the last.
EntryEnd(c, k, logEnd) == IF k = Len(c) THEN logEnd ELSE c[k + 1][2]

(***************************************************************************)
(* The handshake's truncation point (AutoSwitchHAClient.doTruncate,        *)
(* EpochFileCache.findConsistentPoint): the newest local epoch the master  *)
(* also has with the same start offset; the point is where the shorter of  *)
(* the two ends.  An empty cache with an empty log starts from 0; no common *)
(* epoch is a failed handshake (-1, retried later).                        *)
(***************************************************************************)
ConsistentPoint(s, m) ==
    LET lc == epochCache[s]
        mc == epochCache[m]
        common == {k \in DOMAIN lc : \E j \in DOMAIN mc : mc[j] = lc[k]}
    IN IF lc = <<>> THEN (IF blog[s] = <<>> THEN 0 ELSE -1)
       ELSE IF common = {} THEN -1
       ELSE LET k == SetMax(common)
                j == CHOOSE j \in DOMAIN mc : mc[j] = lc[k]
                localEnd == Min(EntryEnd(lc, k, Len(blog[s])), Len(blog[s]))
            IN Min(localEnd, EntryEnd(mc, j, Len(blog[m])))

\* The label <<epoch, epochStartOffset>> of the record at offset o that master
\* m ships on slave s's connection: the master's entry covering o (H2: one
\* record per Transfer, so a batch never spans epochs).  Under B13 the
\* connection's cursor stays in the epoch that was the master's last when it
\* connected, so records of a later epoch go out with that older label.
CursorEntry(m, s) ==
    LET ks == {j \in DOMAIN epochCache[m] : epochCache[m][j][1] = cursorEpoch[s]}
    IN IF ks = {} THEN <<cursorEpoch[s], 0>> ELSE epochCache[m][SetMax(ks)]

TransferLabel(m, s, o) ==
    LET e == epochCache[m][CoveringIndex(epochCache[m], o)]
    IN IF BugTransferCursorNotReset /\ cursorEpoch[s] # 0 /\ e[1] > cursorEpoch[s]
       THEN CursorEntry(m, s) ELSE e

\* Slave s has an HA connection in TRANSFER with master m.
ConnectedTo(s, m) == connected[s] /\ bMasterId[s] = m

\* What a master counts acks over: its local SSS, and while an alter is in
\* flight also the proposed set (the #5663 union rule; B11 drops the proposal,
\* BugShrinkBeforeCommit drops the committed set: a member the master proposed
\* to shrink no longer holds acks back, though the controller may still elect it).
SSSView(m) == bSSS[m] \cup bRemoteSSS[m]
AckView(m) == IF BugCommittedSssOnly THEN bSSS[m]
              ELSE IF BugShrinkBeforeCommit /\ bRemoteSSS[m] # {} THEN bRemoteSSS[m]
              ELSE SSSView(m)

(***************************************************************************)
(* GroupTransferService.doWaitTransfer under allAckInSyncStateSet (GTS    *)
(* L97-118): |S| <= 1, or every other member of S has a connection whose   *)
(* ack covers the request.  B10 is controller mode without all-acks and    *)
(* inSyncReplicas = 1: no wait at all.                                     *)
(***************************************************************************)
AckCovered(m, off) ==
    \/ BugNoAllAck
    \/ Cardinality(AckView(m)) <= 1
    \/ \A s \in AckView(m) \ {m} : ConnectedTo(s, m) /\ ack[s] >= off

(***************************************************************************)
(* AutoSwitchHAService.computeConfirmOffset (ASHA L416-438, the #6662 fix): *)
(* min of the master's max offset and the acks of the other SSS members    *)
(* (local and proposed); if a member has no connection the old value is    *)
(* kept.  B12 takes the min over the connected members only.  A master    *)
(* alone in its SSS confirms everything it wrote (getConfirmOffset's size  *)
(* check; the model applies it to the union, see docs/model.md).           *)
(***************************************************************************)
ConfirmWith(m, view, conn, acks, old) ==
    LET others == view \ {m}
        live == {s \in others : conn[s] /\ bMasterId[s] = m}
    IN IF others = {} THEN Len(blog[m])
       ELSE IF BugConfirmOverConnected THEN SetMin({Len(blog[m])} \cup {acks[s] : s \in live})
       ELSE IF live # others THEN old
       ELSE SetMin({Len(blog[m])} \cup {acks[s] : s \in others})

\* The confirmOffset a master's TRANSFER header carries (ASConn: store.getConfirmOffset()).
\* A slave takes min(it, its own max offset) (ASCli L567); the bug ships the max offset.
HeaderConfirm(m) == IF BugSlaveConfirmFromMaxOffset THEN Len(blog[m]) ELSE confirm[m]

Holds(L, i) == reqs[i].off <= Len(L) /\ L[reqs[i].off] = i

\* Requests still waiting at a broker that dies become producer-side timeouts.
AbortAt(b) ==
    [k \in DOMAIN reqs |-> IF reqs[k].status = Waiting /\ reqs[k].master = b
                            THEN [reqs[k] EXCEPT !.status = ClientTimeout] ELSE reqs[k]]
=============================================================================
