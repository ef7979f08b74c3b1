------------------------- MODULE AckOrderControllers -------------------------
(***************************************************************************)
(* Several controllers over one linearizable store (etcd), deciding for   *)
(* one broker group (issue 37, seed 002; docs/controllers.md).  The store  *)
(* holds AckOrderFailover's controller register -- masterId, masterEpoch, *)
(* syncStateSet, sssEpoch -- under one key with its mod_revision, and the  *)
(* key of the group's shard: its owner, through the owner's etcd lease,   *)
(* and the key's create_revision (the owner's fencing token).             *)
(*                                                                         *)
(* Every decision is a Read (a snapshot of the group key and its          *)
(* revision), the computation of ReplicasInfoManager on that snapshot, and *)
(* one transaction that compares the revision read and the shard token    *)
(* held, then writes.  Heartbeats reach the shard's owner only; a new     *)
(* owner has heard nobody, so it counts every broker alive for one        *)
(* heartbeat timeout (the takeover grace).                                *)
(*                                                                         *)
(* This module refines the controller of AckOrderFailover.tla: every      *)
(* change of the register is one of its ElectMaster or AlterSyncStateSet  *)
(* steps (StoreRefinesFailover).  The brokers' side (logs, acks, roles)   *)
(* is that module's; here a broker only runs or not, and heartbeats.      *)
(* Here a commit carries one decision; the runtime's may carry several    *)
(* (group commit), each decided on the record the one before left: a      *)
(* sequence of these steps, which the controllers machine checks decision *)
(* by decision (reference/failover/controllers_sim.py).                   *)
(* The Python twin is spec/controllers/actions.py (one function per       *)
(* action, same name); the runtime is reference/failover/shards.py with   *)
(* reference/real/controller_cluster.py.  No bounds here:                 *)
(* MCAckOrderControllers.tla and the cfgs hold them.                      *)
(***************************************************************************)
EXTENDS Naturals, FiniteSets

CONSTANTS
    Brokers,        \* the broker group's members (model values)
    Controllers,    \* the controller processes (model values)
    InitialMaster,  \* the master of epoch 1
    NoBroker,       \* model value: no master
    NoController    \* model value: the shard key is absent (no owner)

\* Bug switches, FALSE in every green cfg; each _bug cfg turns one on (docs/model.md).
CONSTANTS
    BugCommitWithoutCompare,      \* the DLedger controller: a decision applied with no compare at all
    BugOwnerSkipsMetadataCompare, \* the owner trusts it is the only writer: compares its token only
    BugNoTakeoverGrace,           \* a new owner counts every broker it has not heard from yet as dead
    BugActAfterLeaseExpired       \* a commit does not compare the shard token (a paused owner writes)

VARIABLES
    \* --- etcd: the group key (ReplicasInfoManager's SyncStateInfo) and its mod_revision ---
    masterId, masterEpoch, syncStateSet, sssEpoch, rev,
    \* --- etcd: the shard key ---
    owner,          \* the controller whose lease holds it, or NoController
    token,          \* its create_revision: one more each time a controller takes it
    \* --- the brokers (environment) ---
    up,             \* broker -> the process runs and heartbeats
    \* --- each controller process ---
    snap,           \* controller -> its last Read of the group key (rev 0: none yet)
    held,           \* controller -> the shard token it believes it holds (0: none)
    heard,          \* controller -> broker -> counts it alive (BrokerHeartbeatManager, its own table)
    \* --- ghosts, for properties only, and state-space counters ---
    inv_elected,    \* <<epoch, master>> of every election written
    inv_silent,     \* broker -> down, and not heard by the controller service since
    aux_ctrs

storeVars == <<masterId, masterEpoch, syncStateSet, sssEpoch, rev>>
shardVars == <<owner, token>>
ctlVars   == <<snap, held, heard>>
vars == <<masterId, masterEpoch, syncStateSet, sssEpoch, rev, owner, token, up, snap, held, heard,
          inv_elected, inv_silent, aux_ctrs>>

NoSnap == [master |-> NoBroker, epoch |-> 0, sss |-> {}, sssEpoch |-> 0, rev |-> 0]
Snapshot == [master : Brokers \cup {NoBroker}, epoch : Nat, sss : SUBSET Brokers, sssEpoch : Nat, rev : Nat]
CounterKinds == {"take", "expire", "crash", "election", "alter"}

TypeOK ==
    /\ masterId \in Brokers \cup {NoBroker} /\ syncStateSet \subseteq Brokers
    /\ masterEpoch \in Nat /\ sssEpoch \in Nat /\ rev \in Nat
    /\ owner \in Controllers \cup {NoController} /\ token \in Nat
    /\ up \in [Brokers -> BOOLEAN]
    /\ snap \in [Controllers -> Snapshot]
    /\ held \in [Controllers -> Nat]
    /\ heard \in [Controllers -> [Brokers -> BOOLEAN]]
    /\ inv_elected \subseteq (Nat \X Brokers)
    /\ inv_silent \in [Brokers -> BOOLEAN]
    /\ aux_ctrs \in [CounterKinds -> Nat]

ConfigOK ==
    /\ InitialMaster \in Brokers /\ NoBroker \notin Brokers /\ NoController \notin Controllers

Init ==
    /\ masterId = InitialMaster /\ masterEpoch = 1 /\ syncStateSet = {InitialMaster} /\ sssEpoch = 1
    /\ rev = 1
    /\ owner = NoController /\ token = 0
    /\ up = [b \in Brokers |-> TRUE]
    /\ snap = [c \in Controllers |-> NoSnap]
    /\ held = [c \in Controllers |-> 0]
    /\ heard = [c \in Controllers |-> [b \in Brokers |-> FALSE]]
    /\ inv_elected = {<<1, InitialMaster>>}
    /\ inv_silent = [b \in Brokers |-> FALSE]
    /\ aux_ctrs = [k \in CounterKinds |-> 0]

Bump(kind) == aux_ctrs' = [aux_ctrs EXCEPT ![kind] = @ + 1]

(***************************************************************************)
(* ACTION: TakeShard(c)                                                    *)
(* WHO:    controller c's survey (every lease TTL / 3)                     *)
(* CODE:   etcd txn: if create_revision(shards/<s>) = 0 then put it with   *)
(*         c's lease (the election recipe); reference/real/etcd_shards.py  *)
(*         EtcdShards.take, ShardTable.adopt.  RocketMQ: none (one         *)
(*         DLedger leader decides everything).                             *)
(* The new owner has heard nobody yet: it counts every broker alive until *)
(* a whole timeout passes without a heartbeat (ControllerCore._restore).  *)
(***************************************************************************)
TakeShard(c) ==
    /\ owner = NoController
    /\ owner' = c /\ token' = token + 1
    /\ held' = [held EXCEPT ![c] = token + 1]
    /\ heard' = [heard EXCEPT ![c] = [b \in Brokers |-> ~BugNoTakeoverGrace]]
    /\ inv_silent' = [b \in Brokers |-> ~up[b]]
    /\ Bump("take")
    /\ UNCHANGED <<storeVars, up, snap, inv_elected>>

(***************************************************************************)
(* ACTION: LeaseExpires                                                    *)
(* WHO:    etcd, when the owner's keep-alives stop (a crash, a GC pause, a *)
(*         partition)                                                      *)
(* CODE:   the lease's TTL; etcd deletes the shard key                    *)
(* The owner may not know yet: it still believes it holds its token.      *)
(***************************************************************************)
LeaseExpires ==
    /\ owner # NoController
    /\ owner' = NoController
    /\ Bump("expire")
    /\ UNCHANGED <<storeVars, token, up, ctlVars, inv_elected, inv_silent>>

(***************************************************************************)
(* ACTION: Heartbeat(b)                                                    *)
(* WHO:    broker b's BrokerHeartbeat, forwarded by any controller to the   *)
(*         shard's owner                                                   *)
(* CODE:   BrokerOuterAPI.sendHeartbeatToController; ClusterController.    *)
(*         _forward; DefaultBrokerHeartbeatManager.onBrokerHeartbeat       *)
(***************************************************************************)
Heartbeat(b) ==
    /\ up[b] /\ owner # NoController /\ ~heard[owner][b]
    /\ heard' = [heard EXCEPT ![owner][b] = TRUE]
    /\ inv_silent' = [inv_silent EXCEPT ![b] = FALSE]
    /\ UNCHANGED <<storeVars, shardVars, up, snap, held, inv_elected, aux_ctrs>>

(***************************************************************************)
(* ACTION: Expire(c, b)                                                    *)
(* WHO:    controller c's inactive-broker scan                             *)
(* CODE:   DefaultBrokerHeartbeatManager.scanNotActiveBroker; ControllerCore.alive *)
(* A whole timeout without b's heartbeat: b is down, or c no longer owns  *)
(* the shard (heartbeats go to the owner).                                *)
(***************************************************************************)
Expire(c, b) ==
    /\ heard[c][b]
    /\ ~up[b] \/ owner # c
    /\ heard' = [heard EXCEPT ![c][b] = FALSE]
    /\ UNCHANGED <<storeVars, shardVars, up, snap, held, inv_elected, inv_silent, aux_ctrs>>

(***************************************************************************)
(* ACTION: BrokerCrash(b) / BrokerRestart(b)                               *)
(* WHO:    the environment (AckOrderFailover's actions of the same names) *)
(* CODE:   (environment); a crashed broker's heartbeats stop               *)
(***************************************************************************)
BrokerCrash(b) ==
    /\ up[b]
    /\ up' = [up EXCEPT ![b] = FALSE]
    /\ inv_silent' = [inv_silent EXCEPT ![b] = TRUE]
    /\ Bump("crash")
    /\ UNCHANGED <<storeVars, shardVars, ctlVars, inv_elected>>

BrokerRestart(b) ==
    /\ ~up[b]
    /\ up' = [up EXCEPT ![b] = TRUE]
    /\ UNCHANGED <<storeVars, shardVars, ctlVars, inv_elected, inv_silent, aux_ctrs>>

(***************************************************************************)
(* ACTION: Read(c)                                                         *)
(* WHO:    controller c, before a decision                                 *)
(* CODE:   etcd range read of the shard's keys at takeover                 *)
(*         (EtcdShards.take); the core's in-memory copy after that          *)
(* Linearizable or serializable: a stale snapshot costs a failed compare, *)
(* never a wrong write (Fenced).                                          *)
(***************************************************************************)
Read(c) ==
    /\ snap' = [snap EXCEPT ![c] = [master |-> masterId, epoch |-> masterEpoch, sss |-> syncStateSet,
                                    sssEpoch |-> sssEpoch, rev |-> rev]]
    /\ UNCHANGED <<storeVars, shardVars, up, held, heard, inv_elected, inv_silent, aux_ctrs>>

\* The commit's compares (ShardTable.next_commit, EtcdShards.commit): the shard key's
\* create_revision is the token c holds, and the group key's mod_revision the one c read.
Fenced(c) ==
    /\ BugCommitWithoutCompare \/ BugActAfterLeaseExpired \/ (owner = c /\ token = held[c])
    /\ BugCommitWithoutCompare \/ BugOwnerSkipsMetadataCompare \/ rev = snap[c].rev

Decides(c) == snap[c].rev > 0 /\ held[c] > 0

(***************************************************************************)
(* ACTION: ElectMaster(c)                                                  *)
(* WHO:    controller c, the shard's owner (its scan, or a broker's        *)
(*         request); a compare-and-write to etcd                           *)
(* CODE:   ReplicasInfoManager.electMaster (RIM L193-276),                 *)
(*         DefaultElectPolicy.elect; ControllerCore._elect on the shard's  *)
(*         core, committed by ClusterController._sync                      *)
(* From c's snapshot: the master is not alive in c's view; any SSS member *)
(* c counts alive takes over (E4), masterEpoch + 1, SSS := {it}, sssEpoch *)
(* + 1; with no candidate the master is cleared and the epoch still bumps. *)
(***************************************************************************)
ElectMaster(c) ==
    LET s == snap[c]
        cands == {b \in s.sss : heard[c][b]}
    IN /\ Decides(c)
       /\ s.master # NoBroker => ~heard[c][s.master]
       /\ Fenced(c)
       /\ rev' = rev + 1 /\ masterEpoch' = s.epoch + 1
       /\ IF cands # {}
          THEN \E n \in cands :
                 /\ masterId' = n /\ syncStateSet' = {n} /\ sssEpoch' = s.sssEpoch + 1
                 /\ inv_elected' = inv_elected \cup {<<s.epoch + 1, n>>}
          ELSE /\ s.master # NoBroker
               /\ masterId' = NoBroker /\ syncStateSet' = s.sss /\ sssEpoch' = s.sssEpoch
               /\ UNCHANGED inv_elected
       /\ Bump("election")
       /\ UNCHANGED <<shardVars, up, ctlVars, inv_silent>>

(***************************************************************************)
(* ACTION: AlterSyncStateSet(c, b)                                         *)
(* WHO:    controller c, the shard's owner, on the master's proposal to    *)
(*         add or drop b                                                   *)
(* CODE:   ReplicasInfoManager.alterSyncStateSet (RIM L110-191);           *)
(*         ControllerCore._alter, committed by ClusterController._sync     *)
(* The new set holds the master and only brokers c counts alive (E3);     *)
(* sssEpoch + 1.                                                          *)
(***************************************************************************)
AlterSyncStateSet(c, b) ==
    LET s == snap[c]
        new == IF b \in s.sss THEN s.sss \ {b} ELSE s.sss \cup {b}
    IN /\ Decides(c) /\ s.master # NoBroker /\ b # s.master
       /\ \A x \in new : heard[c][x]
       /\ Fenced(c)
       /\ syncStateSet' = new /\ sssEpoch' = s.sssEpoch + 1 /\ rev' = rev + 1
       /\ Bump("alter")
       /\ UNCHANGED <<masterId, masterEpoch, shardVars, up, ctlVars, inv_elected, inv_silent>>

Next ==
    \/ \E c \in Controllers :
         \/ TakeShard(c) \/ Read(c) \/ ElectMaster(c)
         \/ \E b \in Brokers : Expire(c, b) \/ AlterSyncStateSet(c, b)
    \/ LeaseExpires
    \/ \E b \in Brokers : Heartbeat(b) \/ BrokerCrash(b) \/ BrokerRestart(b)

Spec == Init /\ [][Next]_vars

(***************************************************************************)
(* Properties (the twin's are spec/controllers/properties.py, same names) *)
(***************************************************************************)
\* No epoch names two masters (AckOrderFailover's property of the same name, on the history).
OneMasterPerEpoch == \A x, y \in inv_elected : x[1] = y[1] => x[2] = y[2]

\* Every change of the register is a step of AckOrderFailover's controller: an election
\* (masterEpoch + 1; a new master from the SSS with SSS := {it}, or the master cleared), or
\* an accepted AlterSyncStateSet (same master and epoch, sssEpoch + 1, the master kept).
\* So AckOrderFailover's properties of the register alone (SSSContainsMaster, E2) hold here too; that
\* an election or a SyncStateSet names only live brokers (E3, E4) is ControllerCore's rule, checked per
\* decision by the controllers machine and against the failover spec by test_controller_core.py.
ElectStep ==
    /\ masterEpoch' = masterEpoch + 1
    /\ \/ masterId' = NoBroker /\ syncStateSet' = syncStateSet /\ sssEpoch' = sssEpoch
       \/ masterId' \in syncStateSet /\ syncStateSet' = {masterId'} /\ sssEpoch' = sssEpoch + 1
AlterStep ==
    /\ masterId' = masterId /\ masterEpoch' = masterEpoch /\ masterId # NoBroker
    /\ sssEpoch' = sssEpoch + 1 /\ masterId \in syncStateSet'
StoreRefinesFailover ==
    [][ElectStep \/ AlterStep]_<<masterId, masterEpoch, syncStateSet, sssEpoch>>

\* An election replaces only a master the controller service has not heard from since it
\* went down: never one that kept heartbeating.
ElectOnlyASilentMaster ==
    [][masterEpoch' > masterEpoch /\ masterId # NoBroker => inv_silent[masterId]]_vars
=============================================================================
