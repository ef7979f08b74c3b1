------------------------------ MODULE AckOrder ------------------------------
(***************************************************************************)
(* The write path of one RocketMQ broker group: put, transient-pool       *)
(* commit, group-commit flush, HA transfer and slave acks, the combined    *)
(* response, deadlines, and the three ways a node can fail.               *)
(*                                                                         *)
(* Every action is headed by WHO performs it and the RocketMQ code it      *)
(* abstracts (paths as in apache/rocketmq develop @8fc57f14; see           *)
(* ../shared/research/rocketmq.md).  The Python twin in spec/actions.py    *)
(* has one function per action, with the same name.                       *)
(*                                                                         *)
(* The branches of an action are named with TLA+ labels (PutAppend::,   *)
(* TimeoutFlushSlave(status)::, ReportRefused::...): spec/coverage.py     *)
(* gives the twin's step the same names, so that coverage of the spec by  *)
(* real runs (fuzz campaigns, Hypothesis runs, traces) and TLC's own      *)
(* coverage (-coverage) are reported branch by branch.  Labels name       *)
(* expressions only: no state is added or lost (tla/manifest.json).       *)
(*                                                                         *)
(* Controller-driven failover (SyncStateSet changes, epochs, election,     *)
(* truncation) is not here yet: syncStateSet is a variable that no action  *)
(* changes, and a slave that the handshake refuses stays refused.          *)
(***************************************************************************)
EXTENDS AckOrderFunctions

Init ==
    /\ mstate = "UP"
    /\ log = <<>>
    /\ committed = 0 /\ flushed = 0 /\ durable = 0
    /\ writable = TRUE
    /\ unwritten = {}
    /\ landed = 0
    /\ reqs = <<>>
    /\ connected = [r \in Replicas |-> FALSE]
    /\ ack = [r \in Replicas |-> 0]
    /\ push2SlaveMaxOffset = 0
    /\ syncStateSet = Replicas
    /\ rlog = [r \in Replicas |-> <<>>]
    /\ rUp = [r \in Replicas |-> TRUE]
    /\ inv_responses = {}
    /\ aux_ctrs = [k \in CounterKinds |-> 0]

\* The seed-001 fix (CommitOnReplicaWait): a request that will wait for
\* slaves commits the write buffer in the same step, since slaves can only
\* read committed data (reference: MasterCore._register_replica_leg).
CommitsOnPut == CommitOnReplicaWait /\ ReplMode = "SYNC_MASTER"

(***************************************************************************)
(* ACTION: Put                                                             *)
(* WHO:    producer -> SendMessageProcessor thread -> CommitLog           *)
(* CODE:   CommitLog.asyncPutMessage (CL L947-1122), appendMessage under   *)
(*         putMessageLock; HookUtils.checkBeforePutMessage for the reject. *)
(* A message is appended at the end of the log, so offsets grow           *)
(* contiguously.  Without the transient store pool the append lands in    *)
(* the mmap'd page cache (committed moves with it); with the pool it lands *)
(* in the write buffer and waits for Commit.  The request then waits for   *)
(* its flush leg (SYNC_FLUSH) and its replica leg (SYNC_MASTER).  After a  *)
(* failed fsync the store is not writeable and the put is rejected before  *)
(* the append with SERVICE_NOT_AVAILABLE.  Under CommitsOnPut the append   *)
(* is committed at once.                                                   *)
(***************************************************************************)
Put ==
    /\ mstate = "UP"
    /\ IF writable
       THEN PutAppend::
            LET id == Len(reqs) + 1
                off == Len(log) + 1
            IN /\ log' = Append(log, id)
               /\ committed' = IF TransientStorePool /\ ~CommitsOnPut THEN committed ELSE off
               /\ reqs' = Append(reqs, [off |-> off,
                                        flushDone |-> FlushMode = "ASYNC_FLUSH",
                                        status |-> Waiting])
               /\ UNCHANGED inv_responses
       ELSE PutReject::
            LET id == Len(reqs) + 1
                rejected == [off |-> 0, flushDone |-> FALSE, status |-> ServiceNotAvailable]
            IN /\ reqs' = Append(reqs, rejected)
               /\ inv_responses' = inv_responses \cup {EarlyEvent(id, 0, ServiceNotAvailable, "Reject")}
               /\ UNCHANGED <<log, committed>>
    /\ UNCHANGED <<mstate, flushed, durable, writable, unwritten, landed, haVars, replicaVars,
                   aux_ctrs>>

(***************************************************************************)
(* ACTION: Commit                                                          *)
(* WHO:    master, CommitRealTimeService (transient store pool only)      *)
(* CODE:   CommitLog.CommitRealTimeService (CL L1479-1532),               *)
(*         MappedFileQueue.commit / DefaultMappedFile.commit (MF L567-610) *)
(* Copies the write buffer of the file holding committedWhere into the    *)
(* FileChannel (page cache).  One call never crosses a file end, and it    *)
(* copies what had been written when it started: any amount up to there.  *)
(* The commit-least-pages rule only decides WHEN this runs, so it is a     *)
(* guard of the implementation, not of the spec.  It may be the retry of  *)
(* a commit that failed (records that landed anyway are now counted).      *)
(***************************************************************************)
Commit ==
    /\ TransientStorePool
    /\ mstate = "UP"
    /\ committed < Wrote
    /\ \E target \in (committed + 1)..Min(Wrote, FileEnd(committed)) :
         /\ committed' = target
         /\ IF landed = 0
            THEN CommitCopy(target):: landed' = 0
            ELSE CommitRetry(target):: landed' = Max(0, landed - (target - committed))
    /\ UNCHANGED <<mstate, log, flushed, durable, writable, unwritten, reqs, haVars, replicaVars,
                   inv_responses, aux_ctrs>>

\* How far one MappedFileQueue.flush(0) can reach: the file holding
\* flushedWhere, up to its read position (committed data only).
FlushTarget == Min(committed, FileEnd(flushed))

\* Group commit: every waiter covered by the new flushed offset is
\* released in the same step (one fsync releases the whole batch).
Release(rs, bound) ==
    [k \in DOMAIN rs |-> IF rs[k].status = Waiting /\ ~rs[k].flushDone /\ rs[k].off <= bound
                          THEN [rs[k] EXCEPT !.flushDone = TRUE] ELSE rs[k]]

ReleaseBound(target) == IF BugFlushOneFileReleasesAll THEN committed ELSE target

(***************************************************************************)
(* ACTION: Flush                                                           *)
(* WHO:    master, GroupCommitService (SYNC_FLUSH) or                      *)
(*         FlushRealTimeService (ASYNC_FLUSH)                              *)
(* CODE:   GroupCommitService.doCommit (CL L1661-1767),                    *)
(*         MappedFileQueue.flush (MFQ L658-673), DefaultMappedFile.flush   *)
(* One fsync of the file holding flushedWhere.  It covers the committed   *)
(* data of that file as of when it started, so the new flushed offset is   *)
(* anywhere up to there (data committed while the fsync ran is not         *)
(* covered).  Every waiting request whose nextOffset is now flushed has    *)
(* its flush future completed in the same step.  A message that rolled     *)
(* into the next file needs a second Flush: "flush up to twice" is two     *)
(* steps here.  After a failed fsync whose error was ignored (B1) the      *)
(* pages it covered were marked clean but never reached the disk, and no   *)
(* later fsync writes them again ("fsyncgate"): the durable prefix stops   *)
(* at that hole.  Nothing is flushed once the store is not writable      *)
(* (under BugFsyncCoversFailedWrite the flush path does not look at the    *)
(* writable flag, so the follow-up fsync after a failed write still runs;  *)
(* what it makes durable stops at an unwritten record: the disk holds     *)
(* zeros there).                                                           *)
(***************************************************************************)
FlushAllowed == writable \/ BugFsyncCoversFailedWrite

Flush ==
    /\ mstate = "UP"
    /\ FlushAllowed
    /\ flushed < committed
    /\ \E target \in (flushed + 1)..FlushTarget :
         /\ flushed' = target
         /\ IF durable = flushed
            THEN FlushDurable(target):: durable' = Min(target, PageCacheEnd)
            ELSE FlushBehindHole(target):: durable' = durable
         /\ reqs' = Release(reqs, ReleaseBound(target))
    /\ UNCHANGED <<mstate, log, committed, writable, unwritten, landed, haVars, replicaVars,
                   inv_responses, aux_ctrs>>

(***************************************************************************)
(* ACTION: FlushFail                                                       *)
(* WHO:    master, GroupCommitService / FlushRealTimeService; the disk     *)
(* CODE:   DefaultMappedFile.flush catch IOException -> RunningFlags       *)
(*         .makeNotWriteable (MF L531-564; fixed by #9713, bug B1 before)  *)
(* fsync returns an error.  The correct store leaves flushedWhere alone   *)
(* and stops accepting writes; waiters can only time out.  Under B1 the   *)
(* store advances flushedWhere anyway and releases the waiters.           *)
(***************************************************************************)
FlushFail ==
    /\ mstate = "UP"
    /\ FlushAllowed
    /\ flushed < committed
    /\ IF BugFlushIgnoresFsyncError
       THEN FlushFailIgnored::
            /\ \E target \in (flushed + 1)..FlushTarget :
                 /\ flushed' = target
                 /\ reqs' = Release(reqs, ReleaseBound(target))
            /\ UNCHANGED writable
       ELSE FlushFailReadOnly::
            /\ writable' = FALSE
            /\ UNCHANGED <<flushed, reqs>>
    /\ aux_ctrs' = [aux_ctrs EXCEPT !["fsyncFailure"] = @ + 1]
    /\ UNCHANGED <<mstate, log, committed, durable, unwritten, landed, haVars, replicaVars,
                   inv_responses>>

(***************************************************************************)
(* ACTION: WriteFail                                                       *)
(* WHO:    master; the disk (pwrite / FileChannel.write returns EIO,        *)
(*         ENOSPC, or a short count)                                       *)
(* CODE:   CommitLog.asyncPutMessage: appendMessage "else -> UNKNOWN_ERROR" *)
(*         (CL L1063-1090); DefaultMappedFile.commit0 catch (MF L612-640);  *)
(*         RunningFlags.makeNotWriteable                                   *)
(* Without the pool a put's own write to the page cache fails: the record  *)
(* stays in the master's memory but is never counted as committed, the    *)
(* producer gets UNKNOWN_ERROR at once and the store stops accepting       *)
(* writes.  With the pool a commit of the write buffer fails (a commit     *)
(* that wrote part of its range first is a Commit step, then this one):   *)
(* the buffer keeps its data, the store stops accepting writes, and        *)
(* commits may be retried.  Either way the failed write may have put some *)
(* whole records into the page cache before it failed (landed): the       *)
(* master does not count them, a crash keeps them.  Under                  *)
(* BugFsyncCoversFailedWrite the master counts the failed records as      *)
(* committed although those that did not land never reached the page      *)
(* cache (unwritten), and the request waits.                               *)
(***************************************************************************)
WriteFail ==
    /\ mstate = "UP"
    /\ IF TransientStorePool
       THEN LET reach == Min(Wrote, FileEnd(committed)) IN
            /\ committed < Wrote
            /\ IF BugFsyncCoversFailedWrite
               THEN WriteFailCommitCounted::
                    \* m records of the failed range landed; n records beyond it landed
                    \* too (a write issued behind it), only where nothing before them is missing.
                    \E target \in committed..reach, m, n \in 0..(reach - committed) :
                         /\ Min(landed, target - committed) <= m /\ m <= target - committed
                         /\ landed - (target - committed) <= n /\ n <= reach - target
                         /\ n > 0 => m = target - committed /\ unwritten = {}
                         /\ committed' = target
                         /\ unwritten' = unwritten \cup (committed + m + 1)..target
                         /\ landed' = n
               ELSE WriteFailCommit::
                    /\ \E n \in landed..(reach - committed) : landed' = n
                    /\ UNCHANGED <<committed, unwritten>>
            /\ UNCHANGED <<log, reqs, inv_responses>>
       ELSE LET id == Len(reqs) + 1
                off == Len(log) + 1
            IN /\ writable
               /\ log' = Append(log, id)
               /\ IF BugFsyncCoversFailedWrite
                  THEN WriteFailPutCounted::
                       /\ committed' = off
                       /\ \E m \in 0..1 : unwritten' = unwritten \cup (IF m = 1 THEN {} ELSE {off})
                       /\ reqs' = Append(reqs, [off |-> off,
                                                flushDone |-> FlushMode = "ASYNC_FLUSH",
                                                status |-> Waiting])
                       /\ UNCHANGED <<landed, inv_responses>>
                  ELSE WriteFailPut::
                       /\ reqs' = Append(reqs, [off |-> off, flushDone |-> FALSE,
                                                status |-> UnknownError])
                       /\ inv_responses' = inv_responses \cup
                            {EarlyEvent(id, off, UnknownError, "WriteFail")}
                       /\ \E n \in 0..1 : landed' = n
                       /\ UNCHANGED <<committed, unwritten>>
    /\ writable' = FALSE
    /\ aux_ctrs' = [aux_ctrs EXCEPT !["writeFailure"] = @ + 1]
    /\ UNCHANGED <<mstate, flushed, durable, haVars, replicaVars>>

(***************************************************************************)
(* ACTION: Respond(i)                                                      *)
(* WHO:    master, the thread completing the last leg (GroupCommitService  *)
(*         or GroupTransferService) through thenCombine                    *)
(* CODE:   CommitLog.handleDiskFlushAndHA thenCombine (CL L1316-1335),     *)
(*         GroupTransferService.doWaitTransfer (GTS L79-146)               *)
(* PUT_OK once the flush future is complete and the acks the master has   *)
(* received cover nextOffset under the ack policy.                         *)
(***************************************************************************)
Respond(i) ==
    /\ mstate = "UP"
    /\ reqs[i].status = Waiting
    /\ FlushLegDone(i)
    /\ ReplicaCovered(reqs[i].off)
    /\ reqs' = [reqs EXCEPT ![i].status = PutOK]
    /\ inv_responses' = inv_responses \cup {Event(i, PutOK, "Respond")}
    /\ RespondTaken:: UNCHANGED <<mstate, log, committed, flushed, durable, writable, unwritten, landed, haVars,
                   replicaVars, aux_ctrs>>

\* The request still lacks a leg, so a deadline can complete it.
LegPending(i) ==
    IF BugNoFlushDiskWatcher
    THEN ~ReplicaCovered(reqs[i].off)   \* only GroupTransferService has a deadline
    ELSE ~FlushLegDone(i) \/ ~ReplicaCovered(reqs[i].off)

TimeoutAnswer(i, status) ==
    /\ reqs' = [reqs EXCEPT ![i].status = status]
    /\ inv_responses' = inv_responses \cup {Event(i, status, "Timeout")}

TimeoutApplies(i) ==
    \/ reqs[i].status = Waiting /\ LegPending(i)
    \/ BugDoubleResponse /\ reqs[i].status = PutOK /\ FlushMode = "SYNC_FLUSH"

(***************************************************************************)
(* ACTION: Timeout(i)                                                      *)
(* WHO:    master, FlushDiskWatcher (flush leg) and GroupTransferService   *)
(*         (replica leg), each with the request's own deadline             *)
(* CODE:   FlushDiskWatcher.run (FDW L38-69), GTS deadLine check,          *)
(*         4.x isSlaveOK -> SLAVE_NOT_AVAILABLE                            *)
(* A deadline passes while a leg is still pending.  The spec has no       *)
(* clock: a deadline may pass at any time, which also covers fail-fast    *)
(* answers such as SLAVE_NOT_AVAILABLE at registration.  The first        *)
(* completion wins; the status follows thenCombine's precedence over the  *)
(* legs still pending at that moment.                                      *)
(***************************************************************************)
Timeout(i) ==
    /\ mstate = "UP"
    /\ TimeoutApplies(i)
    /\ \E status \in TimeoutStatuses(i) :
         CASE status = FlushDiskTimeout  -> TimeoutFlushDisk(status):: TimeoutAnswer(i, status)
           [] status = FlushSlaveTimeout -> TimeoutFlushSlave(status):: TimeoutAnswer(i, status)
           [] status = SlaveNotAvailable -> TimeoutSlaveNotAvailable(status):: TimeoutAnswer(i, status)
           [] status = PutOK             -> TimeoutAsOK(status):: TimeoutAnswer(i, status)
    /\ UNCHANGED <<mstate, log, committed, flushed, durable, writable, unwritten, landed, haVars,
                   replicaVars, aux_ctrs>>

(***************************************************************************)
(* ACTION: ReplicaConnect(r)                                               *)
(* WHO:    replica HAClient connects; master AcceptSocketService /         *)
(*         HAConnection reads the first report                             *)
(* CODE:   DefaultHAClient.reportSlaveMaxOffset, DefaultHAConnection       *)
(*         ReadSocketService (slaveRequestOffset), PR #3016's check        *)
(* The slave reports its max offset; the master checks it against its own *)
(* log (B3) and, unlike classic RocketMQ (B22), also that the slave's     *)
(* records are its own.  A refused slave keeps its data and stays out.    *)
(***************************************************************************)
ReplicaConnect(r) ==
    /\ mstate = "UP"
    /\ rUp[r]
    /\ ~connected[r]
    /\ HandshakeAccepts(r)
    /\ connected' = [connected EXCEPT ![r] = TRUE]
    /\ ack' = [ack EXCEPT ![r] = Len(rlog[r])]
    /\ push2SlaveMaxOffset' = Max(push2SlaveMaxOffset, Len(rlog[r]))
    /\ ReplicaConnectTaken:: UNCHANGED <<masterVars, syncStateSet, replicaVars, inv_responses, aux_ctrs>>

\* How far HA may read: committed data only (readPosition), unless buggy.
TransferLimit == IF BugTransferBeyondCommitted THEN Wrote ELSE committed

(***************************************************************************)
(* ACTION: Transfer(r)                                                     *)
(* WHO:    master HAConnection.WriteSocketService -> replica HAClient      *)
(* CODE:   DefaultHAConnection WriteSocketService (L274-375),              *)
(*         getCommitLogData(nextTransferFromWhere); HAClient appends only  *)
(*         when the batch offset equals its max offset (DHCli L184-244)    *)
(* Replica r receives the next record at its end offset.  HA reads        *)
(* through the page cache, so it never sees the transient-pool write      *)
(* buffer: data waits for Commit (seed 001).  A batch of n records is n   *)
(* Transfer steps.                                                         *)
(***************************************************************************)
Transfer(r) ==
    /\ mstate = "UP"
    /\ rUp[r]
    /\ connected[r]
    /\ Len(rlog[r]) < TransferLimit
    /\ rlog' = [rlog EXCEPT ![r] = Append(@, log[Len(@) + 1])]
    /\ TransferTaken:: UNCHANGED <<masterVars, haVars, rUp, inv_responses, aux_ctrs>>

(***************************************************************************)
(* ACTION: ReplicaAck(r)                                                   *)
(* WHO:    replica HAClient reports; master HAConnection.ReadSocketService *)
(* CODE:   DefaultHAClient.reportSlaveMaxOffset (DHCli L231-244),          *)
(*         DefaultHAConnection L211-253, DefaultHAService                  *)
(*         .notifyTransferSome (push2SlaveMaxOffset CAS max), GTS wakeup   *)
(* The slave reports its max offset (page cache, not flushed).  A report  *)
(* travels while more data arrives, so it may be below what the slave     *)
(* holds by the time the master reads it: any offset above the last ack.  *)
(* The master rejects a report beyond what it could have shipped          *)
(* (committed data) by closing the connection: never reached with an      *)
(* honest slave in a correct run (reachable under BugTransferBeyondCommitted, *)
(* and by the forged reports of ForgedAck).                                *)
(***************************************************************************)
\* The master's answer to a report: record it, or close the connection.
TakeReport(r, reported) ==
    IF AckAccepted(reported)
    THEN ReportTaken::
         /\ ack' = [ack EXCEPT ![r] = reported]
         /\ push2SlaveMaxOffset' = Max(push2SlaveMaxOffset, reported)
         /\ UNCHANGED connected
    ELSE ReportRefused::
         /\ connected' = [connected EXCEPT ![r] = FALSE]
         /\ ack' = [ack EXCEPT ![r] = 0]
         /\ UNCHANGED push2SlaveMaxOffset

ReplicaAck(r) ==
    /\ mstate = "UP"
    /\ rUp[r]
    /\ connected[r]
    /\ \E reported \in (ack[r] + 1)..Len(rlog[r]) : TakeReport(r, reported)
    /\ UNCHANGED <<masterVars, syncStateSet, replicaVars, inv_responses, aux_ctrs>>

(***************************************************************************)
(* ACTION: ForgedAck(r)                                                    *)
(* WHO:    anything that can write to the HA port: a buggy or forged       *)
(*         slave, a corrupting middlebox (B3: "any TCP client connects to  *)
(*         10912 and sends a huge offset")                                 *)
(* CODE:   DefaultHAConnection.ReadSocketService (L211-253), the check of  *)
(*         PR #3016                                                        *)
(* A report on r's connection that the slave never made, beyond what the  *)
(* master committed (up to one past everything it wrote).  The master     *)
(* must refuse it by its own watermark; a report at or below committed     *)
(* that the slave does not hold is indistinguishable from the truth and is *)
(* out of scope (RocketMQ trusts slaves that far).                         *)
(***************************************************************************)
ForgedAck(r) ==
    /\ mstate = "UP"
    /\ connected[r]
    /\ \E reported \in (Max(committed, ack[r]) + 1)..(Wrote + 1) : TakeReport(r, reported)
    /\ aux_ctrs' = [aux_ctrs EXCEPT !["forgedReport"] = @ + 1]
    /\ UNCHANGED <<masterVars, syncStateSet, replicaVars, inv_responses>>

(***************************************************************************)
(* ACTION: ReplicaCrash(r)                                                 *)
(* WHO:    the replica's broker process dies                               *)
(* CODE:   (environment)  HAConnection closed on the master side           *)
(* The process dies; its page cache survives (replica power loss is not   *)
(* modelled: acks are page-cache acks, rocketmq.md A4).                    *)
(***************************************************************************)
ReplicaCrash(r) ==
    /\ rUp[r]
    /\ rUp' = [rUp EXCEPT ![r] = FALSE]
    /\ connected' = [connected EXCEPT ![r] = FALSE]
    /\ ack' = [ack EXCEPT ![r] = 0]
    /\ aux_ctrs' = [aux_ctrs EXCEPT !["replicaCrash"] = @ + 1]
    /\ ReplicaCrashTaken:: UNCHANGED <<masterVars, push2SlaveMaxOffset, syncStateSet, rlog, inv_responses>>

(***************************************************************************)
(* ACTION: ReplicaDisconnect(r)                                            *)
(* WHO:    the network between the master and a slave                      *)
(* CODE:   HAConnection closed on a socket error or heartbeat expiry        *)
(*         (haHousekeepingInterval); HAClient.closeMaster                  *)
(* The connection drops while both processes live; the master forgets    *)
(* the acks of that connection (push2SlaveMaxOffset keeps its maximum).   *)
(***************************************************************************)
ReplicaDisconnect(r) ==
    /\ connected[r]
    /\ connected' = [connected EXCEPT ![r] = FALSE]
    /\ ack' = [ack EXCEPT ![r] = 0]
    /\ aux_ctrs' = [aux_ctrs EXCEPT !["replicaDisconnect"] = @ + 1]
    /\ ReplicaDisconnectTaken:: UNCHANGED <<masterVars, push2SlaveMaxOffset, syncStateSet, replicaVars, inv_responses>>

(***************************************************************************)
(* ACTION: ReplicaRestart(r)                                               *)
(* WHO:    the replica's broker process starts again                       *)
(* CODE:   BrokerStartup -> DefaultMessageStore.load/recover -> HAClient    *)
(***************************************************************************)
ReplicaRestart(r) ==
    /\ ~rUp[r]
    /\ rUp' = [rUp EXCEPT ![r] = TRUE]
    /\ ReplicaRestartTaken:: UNCHANGED <<masterVars, haVars, rlog, inv_responses, aux_ctrs>>

\* What a dead master leaves behind: no connections, no acks in memory,
\* waiting producers time out on their side.
MasterGone ==
    /\ connected' = [r \in Replicas |-> FALSE]
    /\ ack' = [r \in Replicas |-> 0]
    /\ push2SlaveMaxOffset' = 0
    /\ UNCHANGED syncStateSet

(***************************************************************************)
(* ACTION: MasterProcessCrash                                              *)
(* WHO:    the master's broker process dies (kill -9, OOM)                 *)
(* CODE:   (environment); the abort file stays, recovery will be abnormal  *)
(* The page cache survives; the transient-pool write buffer is user-space *)
(* memory and is lost with the process.                                    *)
(***************************************************************************)
MasterProcessCrash ==
    /\ mstate = "UP"
    /\ mstate' = "PROC_DOWN"
    /\ log' = SubSeq(log, 1, PageCacheEnd)
    /\ committed' = PageCacheEnd
    /\ flushed' = Min(flushed, PageCacheEnd)
    /\ durable' = Min(durable, PageCacheEnd)
    /\ writable' = TRUE
    /\ unwritten' = {}
    /\ landed' = 0
    /\ reqs' = AbortWaiting(reqs)
    /\ inv_responses' = inv_responses \cup AbortEvents
    /\ MasterGone
    /\ aux_ctrs' = [aux_ctrs EXCEPT !["masterProcessCrash"] = @ + 1]
    /\ MasterProcessCrashTaken:: UNCHANGED replicaVars

(***************************************************************************)
(* ACTION: MasterMachineCrash                                              *)
(* WHO:    the master's machine loses power (or the OS crashes)            *)
(* CODE:   (environment)                                                   *)
(* Only part of what was not fsync'd reaches the disk: any prefix between *)
(* the durable offset and the end of the page cache survives, possibly    *)
(* followed by one partly written (torn) record.  It can also strike a    *)
(* master whose process already died, before the page cache was written. *)
(***************************************************************************)
MasterMachineCrash ==
    /\ mstate \in {"UP", "PROC_DOWN"}
    /\ \E keep \in Min(durable, PageCacheEnd)..PageCacheEnd, torn \in BOOLEAN :
         /\ torn => keep < PageCacheEnd
         /\ IF torn
            THEN MachineCrashTorn(keep, torn):: log' = SubSeq(log, 1, keep) \o <<Torn>>
            ELSE MachineCrashWhole(keep, torn):: log' = SubSeq(log, 1, keep)
         /\ committed' = keep /\ flushed' = keep /\ durable' = keep
    /\ mstate' = "MACHINE_DOWN"
    /\ writable' = TRUE
    /\ unwritten' = {}
    /\ landed' = 0
    /\ reqs' = AbortWaiting(reqs)
    /\ inv_responses' = inv_responses \cup AbortEvents
    /\ MasterGone
    /\ aux_ctrs' = [aux_ctrs EXCEPT !["masterMachineCrash"] = @ + 1]
    /\ UNCHANGED replicaVars

(***************************************************************************)
(* ACTION: Recover                                                         *)
(* WHO:    the master's broker process starts again                        *)
(* CODE:   DefaultMessageStore.load/recover, CommitLog.recoverAbnormally   *)
(*         (CL L731-862): CRC scan, truncateDirtyFiles(processOffset)      *)
(* The scan stops at the first record whose CRC fails and truncates       *)
(* there.  Our store then fsyncs what it kept, so every watermark equals  *)
(* the recovered length (RocketMQ sets flushedWhere without forcing).     *)
(***************************************************************************)
Recover ==
    /\ mstate # "UP"
    /\ LET kept == RecoveredLog(log)
       IN /\ IF kept = log
             THEN RecoverAsIs:: log' = log
             ELSE RecoverTruncate:: log' = kept
          /\ committed' = Len(kept) /\ flushed' = Len(kept) /\ durable' = Len(kept)
    /\ mstate' = "UP"
    /\ writable' = TRUE
    /\ UNCHANGED <<unwritten, landed, reqs, haVars, replicaVars, inv_responses, aux_ctrs>>

MasterNext ==
    \/ Put \/ Commit \/ Flush \/ FlushFail \/ WriteFail
    \/ \E i \in DOMAIN reqs : Respond(i) \/ Timeout(i)
    \/ MasterProcessCrash \/ MasterMachineCrash \/ Recover

ReplicaNext ==
    \E r \in Replicas :
        \/ ReplicaConnect(r) \/ Transfer(r) \/ ReplicaAck(r) \/ ForgedAck(r)
        \/ ReplicaDisconnect(r) \/ ReplicaCrash(r) \/ ReplicaRestart(r)

Next == MasterNext \/ ReplicaNext

\* Fairness only on progress and healing actions: puts, crashes and fsync
\* failures are the environment's choice and may never happen.  Request ids
\* are unbounded in the spec, so the MC module says which ids to quantify.
RespondIf(i) == i \in DOMAIN reqs /\ Respond(i)
TimeoutIf(i) == i \in DOMAIN reqs /\ Timeout(i)

FairnessOver(ids) ==
    /\ WF_vars(Commit)
    /\ WF_vars(Flush)
    /\ WF_vars(Recover)
    /\ \A r \in Replicas : /\ WF_vars(ReplicaConnect(r)) /\ WF_vars(Transfer(r))
                           /\ WF_vars(ReplicaAck(r)) /\ WF_vars(ReplicaRestart(r))
    /\ \A i \in ids : WF_vars(RespondIf(i)) /\ WF_vars(TimeoutIf(i))

SpecOver(ids) == Init /\ [][Next]_vars /\ FairnessOver(ids)
=============================================================================
