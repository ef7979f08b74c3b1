------------------------- MODULE AckOrderProperties -------------------------
(***************************************************************************)
(* Safety invariants, liveness, and the debug (reachability) invariants.   *)
(* The names are shared with spec/properties.py and the tests.             *)
(***************************************************************************)
EXTENDS AckOrder

(***************************************************************************)
(* Ack-time checks of one response event (its watermark snapshot).  They  *)
(* are also what the VIEW keeps of the ghost history: in a correct run     *)
(* they are determined by the status, so the VIEW adds no states, and a    *)
(* violating history never merges with a clean one.                        *)
(***************************************************************************)
AckFlushOK(e) == (e.status = PutOK /\ FlushMode = "SYNC_FLUSH") => e.flushed >= e.off
AckReplOK(e)  == (e.status = PutOK /\ ReplMode = "SYNC_MASTER") => PolicyHolds(e.holders, e.sss)
AckWriteOK(e) == e.status = PutOK => e.written

TimeoutStatusOK(e) == e.precedenceOK   \* see PrecedenceOK in AckOrderFunctions

ResponseDigest == {<<e.id, e.status, e.cause, AckFlushOK(e), AckReplOK(e), AckWriteOK(e),
                     TimeoutStatusOK(e)>> : e \in inv_responses}

(***************************************************************************)
(* WatermarksOrdered: flushed <= committed <= wrote on a live master, and  *)
(* while the master lives no replica it talks to holds, or has reported,   *)
(* data the master had not committed.  (A slave refused by the handshake  *)
(* may hold more: that is the replica-ahead case, see LogMatching.)        *)
(***************************************************************************)
WatermarksOrdered ==
    mstate = "UP" =>
        /\ durable <= flushed
        /\ flushed <= committed
        /\ committed <= Wrote
        /\ push2SlaveMaxOffset <= committed
        /\ \A r \in Replicas : connected[r] =>
              /\ ack[r] <= Len(rlog[r])
              /\ Len(rlog[r]) <= committed

(***************************************************************************)
(* LogMatching: a replica the master streams to and counts acks from has  *)
(* a log that is a prefix of the master's: same offsets, same records.    *)
(* This is what breaks when a slave that was ahead of a master that lost  *)
(* power is let back in by offset alone (B22).                             *)
(***************************************************************************)
LogMatching ==
    mstate = "UP" => \A r \in Replicas : connected[r] => IsPrefix(rlog[r], log)

(***************************************************************************)
(* NoAckBeforeFlush: under SYNC_FLUSH, PUT_OK implies flushed >= nextOffset *)
(* at the moment of the response.                                          *)
(***************************************************************************)
NoAckBeforeFlush == \A e \in inv_responses : AckFlushOK(e)

(***************************************************************************)
(* NoAckBeforeReplicas: under SYNC_MASTER, PUT_OK implies the replicas the *)
(* ack policy names held the message at the moment of the response (they  *)
(* reported >= nextOffset, and the report was true).                       *)
(***************************************************************************)
NoAckBeforeReplicas == \A e \in inv_responses : AckReplOK(e)

(***************************************************************************)
(* NoAckBeforeWrite: PUT_OK implies the request's record was in the log   *)
(* when answered: in the page cache, or (with the transient store pool)   *)
(* in the write buffer, and never a record whose write failed.  Under      *)
(* SYNC_FLUSH NoAckBeforeFlush says more, as long as the flushed range     *)
(* holds no unwritten bytes, which is what this property pins.             *)
(***************************************************************************)
NoAckBeforeWrite == \A e \in inv_responses : AckWriteOK(e)

(***************************************************************************)
(* TimeoutStatusPrecedence: the status of every deadline's error follows  *)
(* thenCombine's precedence over the legs pending at that moment.          *)
(***************************************************************************)
TimeoutStatusPrecedence == \A e \in inv_responses : TimeoutStatusOK(e)

(***************************************************************************)
(* AckedSurvivesCrash: every PUT_OK message survives the crashes the       *)
(* configuration promises to survive.  SYNC_FLUSH: any master crash, the   *)
(* message stays in the master's log.  SYNC_MASTER: any master crash, the  *)
(* message stays in the master's log or on the replicas the policy names   *)
(* (all of the SyncStateSet under ALL_IN_SYNC).  ASYNC_FLUSH with          *)
(* ASYNC_MASTER promises nothing across a crash.                           *)
(***************************************************************************)
Promised == FlushMode = "SYNC_FLUSH" \/ ReplMode = "SYNC_MASTER"

Survives(i) ==
    \/ Holds(log, i)
    \/ ReplMode = "SYNC_MASTER" /\ PolicyHolds(Holders(i), syncStateSet)

AckedSurvivesCrash ==
    Promised => \A i \in DOMAIN reqs : reqs[i].status = PutOK => Survives(i)

(***************************************************************************)
(* OneResponsePerRequest: a request gets at most one response, the status *)
(* the producer holds is the one recorded, and it never changes.           *)
(***************************************************************************)
OneResponsePerRequest ==
    /\ \A e1, e2 \in inv_responses :
          e1.id = e2.id => <<e1.status, e1.cause>> = <<e2.status, e2.cause>>
    /\ \A e \in inv_responses : e.id \in DOMAIN reqs /\ reqs[e.id].status = e.status
    /\ \A i \in DOMAIN reqs : reqs[i].status = Waiting <=> ~\E e \in inv_responses : e.id = i

(***************************************************************************)
(* TimeoutIsError: a request completed by a deadline is never PUT_OK.      *)
(***************************************************************************)
TimeoutIsError == \A e \in inv_responses : e.cause = "Timeout" => e.status # PutOK

(***************************************************************************)
(* AmbiguousAckOrdered: a message answered with an error may still        *)
(* survive (the answer is ambiguous), but every log the group serves is a *)
(* sequence of whole records in put order: a surviving message is never   *)
(* out of order, and nothing torn or missing sits below an acked one.      *)
(***************************************************************************)
WellFormed(L) == \A k \in 1..Len(L) : L[k] # Torn /\ (k > 1 => L[k - 1] < L[k])

AmbiguousAckOrdered ==
    /\ mstate = "UP" => WellFormed(log)
    /\ \A r \in Replicas : WellFormed(rlog[r])

(***************************************************************************)
(* EveryRequestAnswered (liveness): under fairness of flush, transfer,    *)
(* ack and the deadlines, every waiting request is eventually answered.   *)
(***************************************************************************)
WaitingReq(i)  == i \in DOMAIN reqs /\ reqs[i].status = Waiting
AnsweredReq(i) == i \in DOMAIN reqs /\ reqs[i].status # Waiting

EveryRequestAnsweredFor(ids) == \A i \in ids : WaitingReq(i) ~> AnsweredReq(i)

(***************************************************************************)
(* ReplicasCatchUp (liveness): once faults stop, every slave ends up       *)
(* connected to a live master with the master's whole committed log,      *)
(* acknowledged, unless its log diverged from the master's (a slave that   *)
(* was ahead of a master that lost power): the handshake refuses that one  *)
(* for good, as classic RocketMQ does (B22).  A slave that keeps losing    *)
(* its link, or that the master refuses although its log is a prefix of   *)
(* the master's, violates it.                                               *)
(***************************************************************************)
Diverged(r) == ~IsPrefix(rlog[r], SubSeq(log, 1, committed))
CaughtUp(r) ==
    /\ mstate = "UP" /\ rUp[r] /\ connected[r]
    /\ Len(rlog[r]) = committed /\ ack[r] = committed

ReplicasCatchUp == \A r \in Replicas : <>[](Diverged(r) \/ CaughtUp(r))

(***************************************************************************)
(* Debug invariants: each MUST be violated by its reachability cfg, which *)
(* proves the model reaches the state the property talks about.            *)
(***************************************************************************)
Debug_NoPutOkUnderSyncMaster ==
    ReplMode = "SYNC_MASTER" => \A i \in DOMAIN reqs : reqs[i].status # PutOK

Debug_NoReplicaAhead == mstate = "UP" => \A r \in Replicas : Len(rlog[r]) <= Wrote

Debug_NoTornTail == \A k \in 1..Len(log) : log[k] # Torn

Debug_NoAmbiguousSurvivor ==
    \A i \in DOMAIN reqs :
        reqs[i].status \in {FlushDiskTimeout, FlushSlaveTimeout, SlaveNotAvailable, ClientTimeout}
            => Holders(i) = {}

Debug_NoUnknownError == \A i \in DOMAIN reqs : reqs[i].status # UnknownError

\* A message answered UNKNOWN_ERROR whose failed write landed anyway is in the
\* log after a crash and recovery (an ambiguous answer, as RocketMQ's is).
Debug_NoUnknownErrorSurvivor ==
    mstate = "UP" => \A i \in DOMAIN reqs :
        reqs[i].status = UnknownError => ~(Holds(log, i) /\ reqs[i].off <= committed)

\* Action-level: a process crash drops records of the transient-pool write
\* buffer (user-space memory dies with the process).
WriteBufferLost == mstate = "UP" /\ mstate' = "PROC_DOWN" /\ Len(log') < Len(log)
Debug_NoWriteBufferLoss == [][~WriteBufferLost]_vars

\* Action-level: the master closes a connection over a forged report.
ForgedReportRefused ==
    /\ aux_ctrs'["forgedReport"] > aux_ctrs["forgedReport"]
    /\ \E r \in Replicas : connected[r] /\ ~connected'[r]
Debug_NoForgedReportRefused == [][~ForgedReportRefused]_vars

\* Action-level: one Flush completes two waiting requests at once.
BatchRelease ==
    Cardinality({k \in DOMAIN reqs : ~reqs[k].flushDone /\ reqs'[k].flushDone}) >= 2

Debug_NoBatchRelease == [][~BatchRelease]_vars
=============================================================================
