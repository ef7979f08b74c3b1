----------------------------- MODULE MCAckOrder -----------------------------
(***************************************************************************)
(* Model-checking wrapper: bounds, bug selection, VIEW and symmetry.      *)
(* The spec modules are unbounded; only perturbations (puts, crashes,     *)
(* fsync and write failures, forged reports) are bounded here, never the healing actions (flush,    *)
(* commit, transfer, ack, restart, recover, deadlines), so liveness stays  *)
(* meaningful.  A cfg names at most one bug: ActiveBug turns on exactly    *)
(* the boolean constant of that name in the spec (all others FALSE).       *)
(***************************************************************************)
EXTENDS Naturals, Sequences, FiniteSets, TLC

CONSTANTS
    Replicas, FlushMode, ReplMode, TransientStorePool, AckPolicy, InSyncReplicas, FileSize,
    CommitOnReplicaWait,
    ActiveBug,                \* "none" or the name of one Bug* constant
    MaxPuts,                  \* requests the producers issue
    MaxMasterProcessCrashes,
    MaxMasterMachineCrashes,
    MaxReplicaCrashes,        \* summed over all replicas
    MaxReplicaDisconnects,    \* network drops, summed over all replicas
    MaxFsyncFailures,
    MaxWriteFailures,         \* failed page-cache writes (puts) or commits (pool)
    MaxForgedReports          \* HA reports no slave made, summed over all replicas

VARIABLES
    mstate, log, committed, flushed, durable, writable, unwritten, landed, reqs,
    connected, ack, push2SlaveMaxOffset, syncStateSet,
    rlog, rUp, inv_responses, aux_ctrs

BugNames == {"none", "BugAckOnWrote", "BugAckOnCommitted", "BugTransferBeyondCommitted",
             "BugAnyReplicaForAllInSync", "BugTimeoutAsOK", "BugFlushOneFileReleasesAll",
             "BugRecoveryKeepsTorn", "BugAcceptAckBeyondLog", "BugHandshakeOffsetOnly",
             "BugFlushIgnoresFsyncError", "BugDoubleResponse", "BugNoFlushDiskWatcher",
             "BugFsyncCoversFailedWrite", "BugAckCheckedAgainstWrote",
             "BugFlushTimeoutHidesSlaveTimeout", "BugHandshakeRefusesCaughtUp"}

ASSUME ActiveBug \in BugNames
ASSUME /\ MaxPuts \in Nat
       /\ {MaxMasterProcessCrashes, MaxMasterMachineCrashes,
           MaxReplicaCrashes, MaxReplicaDisconnects, MaxFsyncFailures,
           MaxWriteFailures, MaxForgedReports} \subseteq Nat

AO == INSTANCE AckOrderProperties WITH
        BugAckOnWrote              <- ActiveBug = "BugAckOnWrote",
        BugAckOnCommitted          <- ActiveBug = "BugAckOnCommitted",
        BugTransferBeyondCommitted <- ActiveBug = "BugTransferBeyondCommitted",
        BugAnyReplicaForAllInSync  <- ActiveBug = "BugAnyReplicaForAllInSync",
        BugTimeoutAsOK             <- ActiveBug = "BugTimeoutAsOK",
        BugFlushOneFileReleasesAll <- ActiveBug = "BugFlushOneFileReleasesAll",
        BugRecoveryKeepsTorn       <- ActiveBug = "BugRecoveryKeepsTorn",
        BugAcceptAckBeyondLog      <- ActiveBug = "BugAcceptAckBeyondLog",
        BugHandshakeOffsetOnly     <- ActiveBug = "BugHandshakeOffsetOnly",
        BugFlushIgnoresFsyncError  <- ActiveBug = "BugFlushIgnoresFsyncError",
        BugDoubleResponse          <- ActiveBug = "BugDoubleResponse",
        BugNoFlushDiskWatcher      <- ActiveBug = "BugNoFlushDiskWatcher",
        BugFsyncCoversFailedWrite  <- ActiveBug = "BugFsyncCoversFailedWrite",
        BugAckCheckedAgainstWrote  <- ActiveBug = "BugAckCheckedAgainstWrote",
        BugFlushTimeoutHidesSlaveTimeout <- ActiveBug = "BugFlushTimeoutHidesSlaveTimeout",
        BugHandshakeRefusesCaughtUp <- ActiveBug = "BugHandshakeRefusesCaughtUp"

ASSUME AO!ConfigOK

vars == AO!vars
Init == AO!Init
RequestIds == 1..MaxPuts

MCPut                == Len(reqs) < MaxPuts /\ AO!Put
MCFlushFail          == aux_ctrs["fsyncFailure"] < MaxFsyncFailures /\ AO!FlushFail
\* Without the pool a failed write is a put: it counts against MaxPuts too.  (An IF, not
\* \/: TLC takes each disjunct of an action as a branch of its own, and would generate every
\* WriteFail twice where both hold; spec/coverage.py compares TLC's counts with the twin's.)
MCWriteFail          == /\ aux_ctrs["writeFailure"] < MaxWriteFailures
                        /\ IF TransientStorePool THEN TRUE ELSE Len(reqs) < MaxPuts
                        /\ AO!WriteFail
MCMasterProcessCrash == aux_ctrs["masterProcessCrash"] < MaxMasterProcessCrashes /\ AO!MasterProcessCrash
MCMasterMachineCrash == aux_ctrs["masterMachineCrash"] < MaxMasterMachineCrashes /\ AO!MasterMachineCrash
MCReplicaCrash(r)    == aux_ctrs["replicaCrash"] < MaxReplicaCrashes /\ AO!ReplicaCrash(r)
MCReplicaDisconnect(r) == aux_ctrs["replicaDisconnect"] < MaxReplicaDisconnects /\ AO!ReplicaDisconnect(r)
MCForgedAck(r)       == aux_ctrs["forgedReport"] < MaxForgedReports /\ AO!ForgedAck(r)

\* The healing actions, unbounded, each under a name of its own: TLC 2.15's coverage
\* report keys an action by where it is defined, and every AO!X is "defined" at the
\* INSTANCE line, so it reports one of them and drops the others.  (A definition that
\* is only an alias is inlined by TLC: the TRUE conjunct keeps each one an action.)
MCCommit            == TRUE /\ AO!Commit
MCFlush             == TRUE /\ AO!Flush
MCRecover           == TRUE /\ AO!Recover
MCRespond(i)        == TRUE /\ AO!Respond(i)
MCTimeout(i)        == TRUE /\ AO!Timeout(i)
MCReplicaConnect(r) == TRUE /\ AO!ReplicaConnect(r)
MCTransfer(r)       == TRUE /\ AO!Transfer(r)
MCReplicaAck(r)     == TRUE /\ AO!ReplicaAck(r)
MCReplicaRestart(r) == TRUE /\ AO!ReplicaRestart(r)

\* AckOrder!Next with the perturbations bounded (same disjuncts, same order).
MCNext ==
    \/ MCPut \/ MCCommit \/ MCFlush \/ MCFlushFail \/ MCWriteFail
    \/ \E i \in DOMAIN reqs : MCRespond(i) \/ MCTimeout(i)
    \/ MCMasterProcessCrash \/ MCMasterMachineCrash \/ MCRecover
    \/ \E r \in Replicas :
         \/ MCReplicaConnect(r) \/ MCTransfer(r) \/ MCReplicaAck(r) \/ MCForgedAck(r)
         \/ MCReplicaDisconnect(r) \/ MCReplicaCrash(r) \/ MCReplicaRestart(r)

MCSpec == Init /\ [][MCNext]_vars /\ AO!FairnessOver(RequestIds)

\* Properties, under the names the cfgs and tla/manifest.json use.
TypeOK                 == AO!TypeOK
WatermarksOrdered      == AO!WatermarksOrdered
LogMatching            == AO!LogMatching
NoAckBeforeFlush       == AO!NoAckBeforeFlush
NoAckBeforeReplicas    == AO!NoAckBeforeReplicas
NoAckBeforeWrite       == AO!NoAckBeforeWrite
TimeoutStatusPrecedence == AO!TimeoutStatusPrecedence
AckedSurvivesCrash     == AO!AckedSurvivesCrash
OneResponsePerRequest  == AO!OneResponsePerRequest
TimeoutIsError         == AO!TimeoutIsError
AmbiguousAckOrdered    == AO!AmbiguousAckOrdered
EveryRequestAnswered   == AO!EveryRequestAnsweredFor(RequestIds)
ReplicasCatchUp        == AO!ReplicasCatchUp

Debug_NoPutOkUnderSyncMaster == AO!Debug_NoPutOkUnderSyncMaster
Debug_NoReplicaAhead         == AO!Debug_NoReplicaAhead
Debug_NoTornTail             == AO!Debug_NoTornTail
Debug_NoAmbiguousSurvivor    == AO!Debug_NoAmbiguousSurvivor
Debug_NoBatchRelease         == AO!Debug_NoBatchRelease
Debug_NoUnknownError         == AO!Debug_NoUnknownError
Debug_NoUnknownErrorSurvivor == AO!Debug_NoUnknownErrorSurvivor
Debug_NoWriteBufferLoss      == AO!Debug_NoWriteBufferLoss
Debug_NoForgedReportRefused  == AO!Debug_NoForgedReportRefused

(***************************************************************************)
(* VIEW: every variable except the raw ghost history, which is replaced   *)
(* by its digest (status, cause, and the outcome of each ack-time check).  *)
(* The digest is what the properties read, so a state is merged only with *)
(* states that agree on every property and on every future: state counts  *)
(* do not depend on TLC's exploration order, and spec/ reproduces them.    *)
(* The aux_ counters gate the perturbations, so they stay in the VIEW:    *)
(* dropping them would merge states with different futures.                *)
(***************************************************************************)
View == <<mstate, log, committed, flushed, durable, writable, unwritten, landed, reqs,
          connected, ack, push2SlaveMaxOffset, syncStateSet,
          rlog, rUp, aux_ctrs, AO!ResponseDigest>>

(***************************************************************************)
(* SymmetricView: View with the replicas made interchangeable.  The ack    *)
(* policies count replicas and never name one, so states that differ by a  *)
(* permutation of Replicas have permuted futures.  Instead of TLC's        *)
(* SYMMETRY (whose representative depends on exploration order when it is  *)
(* combined with a VIEW, so counts varied from run to run), the view keeps *)
(* the bag of per-replica states: exact orbit counting, and reproducible.  *)
(* Used by the large cfgs; never with liveness.                            *)
(***************************************************************************)
ReplicaState(r) == <<connected[r], ack[r], rlog[r], rUp[r], r \in syncStateSet>>

ReplicaBag ==
    [x \in {ReplicaState(r) : r \in Replicas} |->
        Cardinality({r \in Replicas : ReplicaState(r) = x})]

SymmetricView == <<mstate, log, committed, flushed, durable, writable, unwritten, landed, reqs,
                   push2SlaveMaxOffset, aux_ctrs, AO!ResponseDigest, ReplicaBag>>
=============================================================================
