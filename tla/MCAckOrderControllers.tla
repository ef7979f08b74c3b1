------------------------ MODULE MCAckOrderControllers ------------------------
(***************************************************************************)
(* Model-checking wrapper of the controllers spec: bounds and bug         *)
(* selection.  Only perturbations and decisions are bounded (shard takes,  *)
(* lease expiries, broker crashes, elections, alters), never reads,        *)
(* heartbeats or expiry.  A cfg names at most one bug.                     *)
(***************************************************************************)
EXTENDS Naturals, FiniteSets, TLC

CONSTANTS
    Brokers, Controllers, InitialMaster, NoBroker, NoController,
    ActiveBug,          \* "none" or the name of one Bug* constant
    MaxTakes,           \* TakeShard steps (lease generations)
    MaxExpiries,        \* LeaseExpires steps
    MaxCrashes,         \* BrokerCrash steps, summed over the brokers
    MaxElections,       \* ElectMaster commits
    MaxAlters           \* AlterSyncStateSet commits

VARIABLES
    masterId, masterEpoch, syncStateSet, sssEpoch, rev, owner, token, up, snap, held, heard,
    inv_elected, inv_silent, aux_ctrs

BugNames == {"none", "BugCommitWithoutCompare", "BugOwnerSkipsMetadataCompare", "BugNoTakeoverGrace",
             "BugActAfterLeaseExpired"}

ASSUME ActiveBug \in BugNames
ASSUME {MaxTakes, MaxExpiries, MaxCrashes, MaxElections, MaxAlters} \subseteq Nat

CS == INSTANCE AckOrderControllers WITH
        BugCommitWithoutCompare      <- ActiveBug = "BugCommitWithoutCompare",
        BugOwnerSkipsMetadataCompare <- ActiveBug = "BugOwnerSkipsMetadataCompare",
        BugNoTakeoverGrace           <- ActiveBug = "BugNoTakeoverGrace",
        BugActAfterLeaseExpired      <- ActiveBug = "BugActAfterLeaseExpired"

ASSUME CS!ConfigOK

vars == CS!vars
Init == CS!Init
Under(kind, bound) == aux_ctrs[kind] < bound

MCTakeShard(c)        == Under("take", MaxTakes) /\ CS!TakeShard(c)
MCLeaseExpires        == Under("expire", MaxExpiries) /\ CS!LeaseExpires
MCBrokerCrash(b)      == Under("crash", MaxCrashes) /\ CS!BrokerCrash(b)
MCElectMaster(c)      == Under("election", MaxElections) /\ CS!ElectMaster(c)
MCAlterSyncStateSet(c, b) == Under("alter", MaxAlters) /\ CS!AlterSyncStateSet(c, b)

\* AckOrderControllers!Next with the perturbations bounded (same disjuncts, same order).
MCNext ==
    \/ \E c \in Controllers :
         \/ MCTakeShard(c) \/ CS!Read(c) \/ MCElectMaster(c)
         \/ \E b \in Brokers : CS!Expire(c, b) \/ MCAlterSyncStateSet(c, b)
    \/ MCLeaseExpires
    \/ \E b \in Brokers : CS!Heartbeat(b) \/ MCBrokerCrash(b) \/ CS!BrokerRestart(b)

\* Properties, under the names the cfgs and tla/manifest.json use.
TypeOK                 == CS!TypeOK
OneMasterPerEpoch      == CS!OneMasterPerEpoch
StoreRefinesFailover   == CS!StoreRefinesFailover
ElectOnlyASilentMaster == CS!ElectOnlyASilentMaster
=============================================================================
