---------------------------- MODULE Controllers ----------------------------
(***************************************************************************)
(* The design model of issue 37 (docs/controllers.md), not yet a spec of  *)
(* tla/manifest.json: several controllers over one linearizable store      *)
(* (etcd), one broker group.  Each decision is Read (a snapshot and its     *)
(* key's mod_revision), then a commit that compares that revision and the  *)
(* shard-ownership key it holds through its lease, then writes.            *)
(* Heartbeats reach only the shard's owner; a new owner has heard nobody.  *)
(* Run: ackorder tlc --spec docs/design/controllers/Controllers.tla        *)
(*        --config docs/design/controllers/green.cfg  (or a Bug*.cfg with *)
(*        --expect the property tla/tests/test_design_controllers.py names)*)
(***************************************************************************)
EXTENDS Naturals, FiniteSets

CONSTANTS Brokers, Controllers, NoBroker, NoCtl, InitialMaster, MaxEpoch, MaxLease,
          BugCommitWithoutCompare,   \* DLedger: the write does not compare what it read
          BugOwnerSkipsMetadataCompare, \* the owner trusts it is the only writer: lease only
          BugNoTakeoverGrace,        \* a new owner counts brokers it has not heard from yet as expired
          BugActAfterLeaseExpired    \* the write does not compare the shard lease

VARIABLES
    sMaster, sEpoch, sSSS, sRev,     \* store: the group's metadata and its key's revision
    sOwner, sLease,                  \* store: the shard's owner and its lease generation
    up,                              \* broker -> it runs and heartbeats (environment)
    cSnap,                           \* controller -> its last read, or a record with rev 0 (none)
    cLease,                          \* controller -> the lease generation it believes it holds (0: none)
    cView,                           \* controller -> broker -> heard from since it took the shard
    inv_elected,                     \* ghost: <<epoch, master>> pairs every election wrote
    inv_silent                       \* ghost: broker -> it was down since the owner last heard it

vars == <<sMaster, sEpoch, sSSS, sRev, sOwner, sLease, up, cSnap, cLease, cView, inv_elected, inv_silent>>

NoSnap == [master |-> NoBroker, epoch |-> 0, sss |-> {}, rev |-> 0]

Init ==
    /\ sMaster = InitialMaster /\ sEpoch = 1 /\ sSSS = Brokers /\ sRev = 1
    /\ sOwner = NoCtl /\ sLease = 0
    /\ up = [b \in Brokers |-> TRUE]
    /\ cSnap = [c \in Controllers |-> NoSnap]
    /\ cLease = [c \in Controllers |-> 0]
    /\ cView = [c \in Controllers |-> [b \in Brokers |-> TRUE]]
    /\ inv_elected = {<<1, InitialMaster>>}
    /\ inv_silent = [b \in Brokers |-> FALSE]

\* ---- the shard lease ----
\* WHO: a controller.  etcd: put the shard key with the controller's lease, if absent
\* (compare create_revision = 0); the lease generation stands for that key's create_revision.
TakeShard(c) ==
    /\ sOwner = NoCtl /\ sLease < MaxLease
    /\ sOwner' = c /\ sLease' = sLease + 1
    /\ cLease' = [cLease EXCEPT ![c] = sLease + 1]
    \* a new owner has heard nobody: it counts every broker alive until a timeout of silence
    /\ cView' = [cView EXCEPT ![c] = [b \in Brokers |-> ~BugNoTakeoverGrace]]
    /\ inv_silent' = [b \in Brokers |-> ~up[b]]
    /\ UNCHANGED <<sMaster, sEpoch, sSSS, sRev, up, cSnap, inv_elected>>

\* WHO: etcd.  The owner's lease expires (a GC pause, a partition): the key is deleted, and the
\* owner does not know yet.
LeaseExpires ==
    /\ sOwner # NoCtl
    /\ sOwner' = NoCtl
    /\ UNCHANGED <<sMaster, sEpoch, sSSS, sRev, sLease, up, cSnap, cLease, cView, inv_elected, inv_silent>>

\* ---- brokers: heartbeats reach the store's current owner only ----
Heartbeat(b) ==
    /\ up[b] /\ sOwner # NoCtl /\ ~cView[sOwner][b]
    /\ cView' = [cView EXCEPT ![sOwner][b] = TRUE]
    /\ inv_silent' = [inv_silent EXCEPT ![b] = FALSE]
    /\ UNCHANGED <<sMaster, sEpoch, sSSS, sRev, sOwner, sLease, up, cSnap, cLease, inv_elected>>

BrokerDown(b) ==
    /\ up[b]
    /\ up' = [up EXCEPT ![b] = FALSE]
    /\ inv_silent' = [inv_silent EXCEPT ![b] = TRUE]
    /\ UNCHANGED <<sMaster, sEpoch, sSSS, sRev, sOwner, sLease, cSnap, cLease, cView, inv_elected>>

BrokerUp(b) ==
    /\ ~up[b]
    /\ up' = [up EXCEPT ![b] = TRUE]
    /\ UNCHANGED <<sMaster, sEpoch, sSSS, sRev, sOwner, sLease, cSnap, cLease, cView, inv_elected, inv_silent>>

\* A controller that hears nothing from b for the timeout counts it dead.  The owner hears b
\* whenever b is up; a controller that lost the shard hears nobody (its heartbeats go elsewhere).
Expire(c, b) ==
    /\ cView[c][b]
    /\ ~up[b] \/ sOwner # c
    /\ cView' = [cView EXCEPT ![c][b] = FALSE]
    /\ UNCHANGED <<sMaster, sEpoch, sSSS, sRev, sOwner, sLease, up, cSnap, cLease, inv_elected, inv_silent>>

\* ---- decisions: a read, then a compare-and-write ----
\* WHO: any controller.  etcd: a range read (linearizable, or serializable: the compare makes a
\* stale read safe for a write); RocketMQ: ReplicasInfoManager's state before electMaster /
\* alterSyncStateSet.
Read(c) ==
    /\ cSnap' = [cSnap EXCEPT ![c] = [master |-> sMaster, epoch |-> sEpoch, sss |-> sSSS, rev |-> sRev]]
    /\ UNCHANGED <<sMaster, sEpoch, sSSS, sRev, sOwner, sLease, up, cLease, cView, inv_elected, inv_silent>>

Fenced(c) ==
    /\ BugCommitWithoutCompare \/ BugActAfterLeaseExpired \/ (sOwner = c /\ sLease = cLease[c])
    /\ BugCommitWithoutCompare \/ BugOwnerSkipsMetadataCompare \/ sRev = cSnap[c].rev

\* WHO: the shard's owner.  RocketMQ: ReplicasInfoManager.electMaster, DefaultElectPolicy (E2, E4).
\* From c's snapshot: the master is dead in c's view, a live SSS member takes over; an etcd txn
\* comparing the group key's mod_revision and the shard key's create_revision.
ElectMaster(c) ==
    LET snap == cSnap[c] IN
    /\ snap.rev > 0 /\ cLease[c] > 0 /\ snap.epoch < MaxEpoch
    /\ snap.master # NoBroker => ~cView[c][snap.master]
    /\ Fenced(c)
    /\ \E n \in snap.sss :
         /\ cView[c][n] /\ n # snap.master
         /\ sMaster' = n /\ sEpoch' = snap.epoch + 1 /\ sSSS' = {n} /\ sRev' = sRev + 1
         /\ inv_elected' = inv_elected \cup {<<snap.epoch + 1, n>>}
    /\ UNCHANGED <<sOwner, sLease, up, cSnap, cLease, cView, inv_silent>>

\* WHO: the shard's owner, on the master's request.  RocketMQ: ReplicasInfoManager.alterSyncStateSet
\* (E3): add a live broker (shrinks are not needed to show the fencing).
AlterSyncStateSet(c, b) ==
    LET snap == cSnap[c] IN
    /\ snap.rev > 0 /\ cLease[c] > 0 /\ snap.master # NoBroker /\ b \notin snap.sss /\ cView[c][b]
    /\ Fenced(c)
    /\ sSSS' = snap.sss \cup {b} /\ sRev' = sRev + 1
    /\ UNCHANGED <<sMaster, sEpoch, sOwner, sLease, up, cSnap, cLease, cView, inv_elected, inv_silent>>

Next ==
    \/ \E c \in Controllers : TakeShard(c) \/ Read(c) \/ ElectMaster(c)
                              \/ \E b \in Brokers : Expire(c, b) \/ AlterSyncStateSet(c, b)
    \/ LeaseExpires
    \/ \E b \in Brokers : Heartbeat(b) \/ BrokerDown(b) \/ BrokerUp(b)

Spec == Init /\ [][Next]_vars

\* ---- properties ----
OneMasterPerEpoch == \A x, y \in inv_elected : x[1] = y[1] => x[2] = y[2]
EpochsOnlyGrow == [][sEpoch' >= sEpoch]_vars
\* An election replaces a master the controller service has not heard from since it went down.
ElectOnlyASilentMaster ==
    [][sEpoch' > sEpoch /\ sMaster # NoBroker => inv_silent[sMaster]]_vars
\* E4: the new master was in the SyncStateSet the election replaced.
ElectFromTheSSS == [][sEpoch' > sEpoch => sMaster' \in sSSS]_vars
=============================================================================
