--------------------- MODULE AckOrderFailoverProperties ---------------------
(***************************************************************************)
(* Safety invariants, liveness and debug (reachability) invariants of the *)
(* failover spec.  Names are shared with spec/failover/properties.py.     *)
(***************************************************************************)
EXTENDS AckOrderFailover

\* Brokers that are, or are about to become, master in epoch e or later:
\* the controller's choice, and every broker acting as master.
LaterMaster(b, e) ==
    \/ masterId = b /\ masterEpoch >= e
    \/ up[b] /\ role[b] = Master /\ bEpoch[b] >= e

Acked(i) == reqs[i].status = PutOK

(***************************************************************************)
(* AckedSurvivesFailover: a message answered PUT_OK is in the log of every *)
(* master of its epoch or a later one, whatever sequence of process        *)
(* crashes, cut-offs, link drops and elections happened, as long as no     *)
(* broker lost it with its page cache (acks are page-cache acks, A4).     *)
(***************************************************************************)
AckedSurvivesFailover ==
    \A i \in DOMAIN reqs :
        Acked(i) /\ i \notin inv_pcLost =>
            \A b \in Brokers : LaterMaster(b, reqs[i].epoch) => Holds(blog[b], i)

(***************************************************************************)
(* OneMasterPerEpoch: no two brokers act as master in the same epoch, and *)
(* all writes of an epoch come from one broker.                           *)
(***************************************************************************)
OneMasterPerEpoch ==
    /\ \A b1, b2 \in Brokers :
         (b1 # b2 /\ up[b1] /\ up[b2] /\ role[b1] = Master /\ role[b2] = Master) => bEpoch[b1] # bEpoch[b2]
    /\ \A i, j \in DOMAIN reqs : reqs[i].epoch = reqs[j].epoch => reqs[i].master = reqs[j].master

(***************************************************************************)
(* EpochsMonotone: every epoch cache has strictly increasing epochs and   *)
(* non-decreasing start offsets (E1); no broker knows an epoch the        *)
(* controller has not issued; along every log the records' epochs never   *)
(* decrease.                                                               *)
(***************************************************************************)
CacheOrdered(c) == \A k \in 1..(Len(c) - 1) : c[k][1] < c[k + 1][1] /\ c[k][2] <= c[k + 1][2]

EpochsMonotone ==
    \A b \in Brokers :
        /\ CacheOrdered(epochCache[b])
        /\ bEpoch[b] <= masterEpoch
        /\ \A k \in DOMAIN epochCache[b] : epochCache[b][k][1] <= masterEpoch
        /\ \A k \in 1..(Len(blog[b]) - 1) : reqs[blog[b][k]].epoch <= reqs[blog[b][k + 1]].epoch

(***************************************************************************)
(* EpochCacheAccurate: the epoch file reflects the log: every record of a *)
(* live broker lies in the epoch its cache assigns to its offset.  The    *)
(* handshake's truncation point is computed from these caches.            *)
(***************************************************************************)
EpochCacheAccurate ==
    \A b \in Brokers : up[b] =>
        \A k \in DOMAIN blog[b] : EpochAt(epochCache[b], k - 1) = reqs[blog[b][k]].epoch

(***************************************************************************)
(* LogMatchingAcrossEpochs: two live brokers agree on every offset below  *)
(* both their confirmOffsets (records some broker lost with its page      *)
(* cache excepted).                                                        *)
(***************************************************************************)
LogMatchingAcrossEpochs ==
    \A b1, b2 \in Brokers : (up[b1] /\ up[b2]) =>
        \A k \in 1..Min(Min(confirm[b1], confirm[b2]), Min(Len(blog[b1]), Len(blog[b2]))) :
            \/ blog[b1][k] = blog[b2][k]
            \/ blog[b1][k] \in inv_pcLost \/ blog[b2][k] \in inv_pcLost

(***************************************************************************)
(* VisibleImpliesReplicated: what a master lets consumers read is held, at *)
(* the same offsets, by every member of its SSS view (B2, B12).            *)
(***************************************************************************)
VisibleImpliesReplicated ==
    \A m \in Brokers : (up[m] /\ role[m] = Master) =>
        \A s \in SSSView(m), k \in 1..Min(confirm[m], Len(blog[m])) :
            blog[m][k] \notin inv_pcLost => (k <= Len(blog[s]) /\ blog[s][k] = blog[m][k])

(***************************************************************************)
(* SSSContainsMaster: the controller's SSS contains its master, and every *)
(* acting master is in its own SSS and in its proposal.                   *)
(***************************************************************************)
SSSContainsMaster ==
    /\ masterId # NoBroker => masterId \in syncStateSet
    /\ \A b \in Brokers : (up[b] /\ role[b] = Master) =>
         /\ b \in bSSS[b]
         /\ bRemoteSSS[b] # {} => b \in bRemoteSSS[b]

(***************************************************************************)
(* ConfirmWithinLog: no live broker's confirmOffset points past its own   *)
(* log (B19).                                                              *)
(***************************************************************************)
ConfirmWithinLog == \A b \in Brokers : up[b] => confirm[b] <= Len(blog[b])

(***************************************************************************)
(* Liveness.  MasterEventuallyStable: once faults stop (they are bounded)  *)
(* and the controller and brokers are fair, some live broker ends up as   *)
(* the controller's master and knows it.  EveryRequestAnswered: every     *)
(* request is eventually answered.                                         *)
(***************************************************************************)
StableMaster ==
    /\ masterId # NoBroker
    /\ Alive(masterId)
    /\ role[masterId] = Master
    /\ bEpoch[masterId] = masterEpoch

MasterEventuallyStable == <>[]StableMaster

WaitingReq(i)  == i \in DOMAIN reqs /\ reqs[i].status = Waiting
AnsweredReq(i) == i \in DOMAIN reqs /\ reqs[i].status # Waiting

EveryRequestAnsweredFor(ids) == \A i \in ids : WaitingReq(i) ~> AnsweredReq(i)

(***************************************************************************)
(* Debug invariants: each MUST be violated by its reachability cfg.        *)
(***************************************************************************)
\* An acked message is held by a master of a later epoch than its own.
Debug_NoAckedFailover ==
    \A i \in DOMAIN reqs : Acked(i) =>
        ~\E b \in Brokers : b # reqs[i].master /\ up[b] /\ role[b] = Master
                            /\ bEpoch[b] > reqs[i].epoch /\ Holds(blog[b], i)

\* AckedSurvivesFailover without its power-loss exemption: page-cache acks
\* can lose an acked message when one SSS member loses power.
Debug_NoAckedLossAfterPowerLoss ==
    \A i \in DOMAIN reqs :
        Acked(i) => \A b \in Brokers : LaterMaster(b, reqs[i].epoch) => Holds(blog[b], i)

\* Action-level: a handshake truncates records off a broker's log.
HandshakeTruncation == \E s \in Brokers : ~connected[s] /\ connected'[s] /\ Len(blog'[s]) < Len(blog[s])
Debug_NoHandshakeTruncation == [][~HandshakeTruncation]_vars
=============================================================================
