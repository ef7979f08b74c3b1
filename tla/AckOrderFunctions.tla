------------------------- MODULE AckOrderFunctions -------------------------
(***************************************************************************)
(* Pure helpers shared by the actions and the properties.                  *)
(***************************************************************************)
EXTENDS AckOrderTypes

Min(a, b) == IF a < b THEN a ELSE b
Max(a, b) == IF a > b THEN a ELSE b

Wrote == Len(log)   \* wrotePosition of the whole queue (write buffer included)

\* End of the commit-log file holding offset o.  MappedFileQueue finds the
\* file by the watermark's own offset, so a watermark sitting exactly on a
\* boundary belongs to the next file: flush(0) and commit(0) never cross a
\* file end in one call, which is why GroupCommitService may flush twice.
FileEnd(o) == (o \div FileSize + 1) * FileSize

IsPrefix(s, t) == Len(s) <= Len(t) /\ SubSeq(t, 1, Len(s)) = s

\* The record of request i sits at position reqs[i].off of log L.
Holds(L, i) == reqs[i].off > 0 /\ reqs[i].off <= Len(L) /\ L[reqs[i].off] = i

\* The replicas that really hold request i's message right now.
Holders(i) == {r \in Replicas : Holds(rlog[r], i)}

\* Which ack rule GroupTransferService applies (a bug can swap it).
EffectivePolicy ==
    IF BugAnyReplicaForAllInSync /\ AckPolicy = "ALL_IN_SYNC"
    THEN "ANY_REPLICA_MAX" ELSE AckPolicy

\* GroupTransferService.doWaitTransfer: is a request ending at `off`
\* covered by the acks the master has received?  (GTS L79-146; 4.x used
\* push2SlaveMaxOffset, 5.x counts connections, ALL_IN_SYNC the SyncStateSet.)
ReplicaCovered(off) ==
    IF ReplMode = "ASYNC_MASTER" THEN TRUE
    ELSE CASE EffectivePolicy = "ANY_REPLICA_MAX" -> push2SlaveMaxOffset >= off
           [] EffectivePolicy = "AT_LEAST_K" ->
                1 + Cardinality({r \in Replicas : connected[r] /\ ack[r] >= off}) >= InSyncReplicas
           [] EffectivePolicy = "ALL_IN_SYNC" ->
                \A r \in syncStateSet : connected[r] /\ ack[r] >= off

\* The promise of the configured policy, judged on the replicas that really
\* hold a message (used by the properties, never by the protocol).
PolicyHolds(holders, sss) ==
    CASE AckPolicy = "ANY_REPLICA_MAX" -> holders # {}
      [] AckPolicy = "AT_LEAST_K" -> 1 + Cardinality(holders) >= InSyncReplicas
      [] AckPolicy = "ALL_IN_SYNC" -> sss \subseteq holders

\* The flush leg of request i as the completion path sees it.
FlushLegDone(i) ==
    CASE BugAckOnWrote     -> Wrote >= reqs[i].off
      [] BugAckOnCommitted -> committed >= reqs[i].off
      [] OTHER             -> reqs[i].flushDone

AnyReplicaConnected == \E r \in Replicas : connected[r]

\* CommitLog.handleDiskFlushAndHA's thenCombine: a replica failure overrides
\* a flush failure.  SLAVE_NOT_AVAILABLE when no slave is connected; with
\* slaves connected either replica status may be given, because a connected
\* slave can be further behind than haMaxGapNotInSync (4.x isSlaveOK), a
\* distance the spec does not measure.
TimeoutStatuses(i) ==
    IF BugTimeoutAsOK THEN {PutOK}
    ELSE IF BugFlushTimeoutHidesSlaveTimeout /\ ~FlushLegDone(i) THEN {FlushDiskTimeout}
    ELSE IF ~ReplicaCovered(reqs[i].off)
         THEN IF AnyReplicaConnected THEN {FlushSlaveTimeout, SlaveNotAvailable}
              ELSE {SlaveNotAvailable}
         ELSE {FlushDiskTimeout}

\* The HA handshake: the slave's first report is its max offset; the master
\* accepts it only when the slave's log is a prefix of its own page cache
\* (same offset AND same content: a slave that is ahead, or that holds
\* records of an earlier master incarnation at those offsets, is refused).
HandshakeAccepts(r) ==
    CASE BugAcceptAckBeyondLog  -> TRUE
      [] BugHandshakeOffsetOnly -> Len(rlog[r]) <= committed
      [] BugHandshakeRefusesCaughtUp -> IsPrefix(rlog[r], SubSeq(log, 1, committed))
                                        /\ Len(rlog[r]) < committed
      [] OTHER                  -> IsPrefix(rlog[r], SubSeq(log, 1, committed))

\* The master's check of a slave's report (PR #3016, B3): nothing beyond what
\* the transfer may ship, i.e. committed data.
AckAccepted(reported) ==
    \/ BugAcceptAckBeyondLog
    \/ reported <= (IF BugAckCheckedAgainstWrote THEN Wrote ELSE committed)

\* What the page cache really holds: the committed records and those a
\* failed write left there anyway, or (BugFsyncCoversFailedWrite) the
\* committed records up to the first whose write failed.
PageCacheEnd ==
    IF unwritten = {} THEN committed + landed
    ELSE (CHOOSE k \in unwritten : \A j \in unwritten : k <= j) - 1

\* CRC recovery scan: a torn tail record fails its CRC and is truncated.
RecoveredLog(L) ==
    IF Len(L) > 0 /\ L[Len(L)] = Torn /\ ~BugRecoveryKeepsTorn
    THEN SubSeq(L, 1, Len(L) - 1) ELSE L

\* thenCombine's precedence (CL L1316-1335), as TimeoutStatusPrecedence reads
\* it: a deadline's error names the replica leg exactly when that leg is
\* pending (a replica failure overrides a flush failure), and is
\* SLAVE_NOT_AVAILABLE when no slave is connected.
PrecedenceOK(i, status, cause) ==
    LET replPending == ~ReplicaCovered(reqs[i].off)
    IN (cause = "Timeout" /\ status # PutOK) =>
          /\ (status \in {FlushSlaveTimeout, SlaveNotAvailable}) = replPending
          /\ (replPending /\ ~AnyReplicaConnected) => status = SlaveNotAvailable

\* The response event recorded in the ghost history.
Event(i, status, cause) ==
    [id |-> i, off |-> reqs[i].off, status |-> status, cause |-> cause,
     wrote |-> Wrote, committed |-> committed, flushed |-> flushed, durable |-> durable,
     holders |-> Holders(i), sss |-> syncStateSet,
     written |-> Holds(log, i) /\ reqs[i].off \notin unwritten
                 /\ (TransientStorePool \/ reqs[i].off <= committed),
     precedenceOK |-> PrecedenceOK(i, status, cause)]

\* The event of a request answered before its record reached the log
\* (rejected by the admission check, or its own write failed at off).
EarlyEvent(id, off, status, cause) ==
    [id |-> id, off |-> off, status |-> status, cause |-> cause,
     wrote |-> Wrote, committed |-> committed, flushed |-> flushed, durable |-> durable,
     holders |-> {}, sss |-> syncStateSet,
     written |-> FALSE, precedenceOK |-> TRUE]

\* Requests still waiting become producer-side timeouts when the broker dies.
AbortWaiting(rs) ==
    [k \in DOMAIN rs |-> IF rs[k].status = Waiting
                          THEN [rs[k] EXCEPT !.status = ClientTimeout] ELSE rs[k]]

AbortEvents ==
    {Event(k, ClientTimeout, "Crash") : k \in {k \in DOMAIN reqs : reqs[k].status = Waiting}}
=============================================================================
