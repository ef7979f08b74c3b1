------------------------- MODULE MCAckOrderFailover -------------------------
(***************************************************************************)
(* Model-checking wrapper of the failover spec: bounds, bug selection,    *)
(* symmetry.  Only perturbations are bounded (puts, crashes, power        *)
(* losses, cut-offs, link drops, SSS proposals, elections), never the     *)
(* protocol's progress or healing.  A cfg names at most one bug.           *)
(***************************************************************************)
EXTENDS Naturals, Sequences, FiniteSets, TLC

CONSTANTS
    Brokers, InitialMaster, NoBroker,
    ActiveBug,          \* "none" or the name of one Bug* constant
    MaxPuts,            \* requests the producers issue
    MaxBrokerCrashes,   \* process crashes, summed over the brokers
    MaxPowerLosses,     \* machine crashes (page cache lost), summed
    MaxCutOffs,         \* broker <-> controller partitions, summed
    MaxDisconnects,     \* HA link drops, summed
    MaxSssProposals,    \* AlterSyncStateSet proposals (shrink or expand)
    MaxElections        \* ElectMaster steps (with or without a candidate)

VARIABLES
    masterId, masterEpoch, syncStateSet, sssEpoch, reachable, up,
    role, bMasterId, bEpoch, bSSS, bSssEpoch, bRemoteSSS, alterPending,
    blog, epochCache, confirm, staleTail, connected, ack, cursorEpoch,
    reqs, inv_pcLost, aux_ctrs

BugNames == {"none", "BugNoAllAck", "BugCommittedSssOnly", "BugConfirmOverConnected",
             "BugTransferCursorNotReset", "BugTruncateNotDurable", "BugUncleanElection",
             "BugConfirmNotClamped", "BugEpochFileNotDurable", "BugElectKeepsEpoch",
             "BugEpochAppendUnchecked", "BugAlterWithoutFencing", "BugSlaveConfirmFromMaxOffset",
             "BugElectOnlyOnMasterDeath", "BugShrinkBeforeCommit"}

ASSUME ActiveBug \in BugNames
ASSUME {MaxPuts, MaxBrokerCrashes, MaxPowerLosses, MaxCutOffs, MaxDisconnects, MaxSssProposals,
        MaxElections} \subseteq Nat

FO == INSTANCE AckOrderFailoverProperties WITH
        BugNoAllAck               <- ActiveBug = "BugNoAllAck",
        BugCommittedSssOnly       <- ActiveBug = "BugCommittedSssOnly",
        BugConfirmOverConnected   <- ActiveBug = "BugConfirmOverConnected",
        BugTransferCursorNotReset <- ActiveBug = "BugTransferCursorNotReset",
        BugTruncateNotDurable     <- ActiveBug = "BugTruncateNotDurable",
        BugUncleanElection        <- ActiveBug = "BugUncleanElection",
        BugConfirmNotClamped      <- ActiveBug = "BugConfirmNotClamped",
        BugEpochFileNotDurable    <- ActiveBug = "BugEpochFileNotDurable",
        BugElectKeepsEpoch        <- ActiveBug = "BugElectKeepsEpoch",
        BugEpochAppendUnchecked   <- ActiveBug = "BugEpochAppendUnchecked",
        BugAlterWithoutFencing    <- ActiveBug = "BugAlterWithoutFencing",
        BugSlaveConfirmFromMaxOffset <- ActiveBug = "BugSlaveConfirmFromMaxOffset",
        BugElectOnlyOnMasterDeath <- ActiveBug = "BugElectOnlyOnMasterDeath",
        BugShrinkBeforeCommit     <- ActiveBug = "BugShrinkBeforeCommit"

ASSUME FO!ConfigOK

vars == FO!vars
Init == FO!Init
RequestIds == 1..MaxPuts
Under(kind, bound) == aux_ctrs[kind] < bound

MCPut(b)                == Len(reqs) < MaxPuts /\ FO!Put(b)
MCBrokerCrash(b)        == Under("brokerCrash", MaxBrokerCrashes) /\ FO!BrokerCrash(b)
MCBrokerPowerLoss(b)    == Under("powerLoss", MaxPowerLosses) /\ FO!BrokerPowerLoss(b)
MCCutFromController(b)  == Under("cutOff", MaxCutOffs) /\ FO!CutFromController(b)
MCReplicaDisconnect(b)  == Under("disconnect", MaxDisconnects) /\ FO!ReplicaDisconnect(b)
MCShrinkSyncStateSet(m, s) == Under("sssProposal", MaxSssProposals) /\ FO!ShrinkSyncStateSet(m, s)
MCExpandSyncStateSet(m, s) == Under("sssProposal", MaxSssProposals) /\ FO!ExpandSyncStateSet(m, s)
MCElectMaster           == Under("election", MaxElections) /\ FO!ElectMaster

\* AckOrderFailover!Next with the perturbations bounded (same disjuncts, same order).
MCNext ==
    \/ MCElectMaster
    \/ \E m \in Brokers : FO!AlterSyncStateSet(m)
    \/ \E b \in Brokers :
         \/ MCPut(b) \/ FO!ChangeToMaster(b) \/ FO!ChangeToSlave(b) \/ FO!ChangeSyncStateSet(b)
         \/ FO!ReplicaConnect(b) \/ FO!Transfer(b) \/ FO!ReplicaAck(b) \/ MCReplicaDisconnect(b)
         \/ \E s \in Brokers : MCShrinkSyncStateSet(b, s) \/ MCExpandSyncStateSet(b, s)
         \/ MCBrokerCrash(b) \/ MCBrokerPowerLoss(b) \/ FO!BrokerRestart(b)
         \/ MCCutFromController(b) \/ FO!ReconnectToController(b)
    \/ \E i \in DOMAIN reqs : FO!Respond(i) \/ FO!Timeout(i)

MCSpec == Init /\ [][MCNext]_vars /\ FO!FairnessOver(RequestIds)

\* Properties, under the names the cfgs and tla/manifest.json use.
TypeOK                   == FO!TypeOK
AckedSurvivesFailover    == FO!AckedSurvivesFailover
OneMasterPerEpoch        == FO!OneMasterPerEpoch
EpochsMonotone           == FO!EpochsMonotone
EpochCacheAccurate       == FO!EpochCacheAccurate
LogMatchingAcrossEpochs  == FO!LogMatchingAcrossEpochs
VisibleImpliesReplicated == FO!VisibleImpliesReplicated
SSSContainsMaster        == FO!SSSContainsMaster
ConfirmWithinLog         == FO!ConfirmWithinLog
MasterEventuallyStable   == FO!MasterEventuallyStable
EveryRequestAnswered     == FO!EveryRequestAnsweredFor(RequestIds)

Debug_NoAckedFailover           == FO!Debug_NoAckedFailover
Debug_NoAckedLossAfterPowerLoss == FO!Debug_NoAckedLossAfterPowerLoss
Debug_NoHandshakeTruncation     == FO!Debug_NoHandshakeTruncation

(***************************************************************************)
(* Symmetry: the brokers other than the initial master are                 *)
(* interchangeable (the initial master is distinguished by Init).  TLC    *)
(* keeps one state per orbit (its fingerprint-minimal member), so the     *)
(* distinct-state count is the number of orbits, whatever the exploration  *)
(* order; the twin counts the same orbits.  Safety cfgs only: symmetry is  *)
(* unsound for liveness.                                                   *)
(***************************************************************************)
FollowerSymmetry == Permutations(Brokers \ {InitialMaster})
=============================================================================
