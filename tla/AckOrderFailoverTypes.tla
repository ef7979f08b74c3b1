----------------------- MODULE AckOrderFailoverTypes -----------------------
(***************************************************************************)
(* Constants, variables and types of the failover spec: one RocketMQ 5    *)
(* broker group in controller mode (RIP-44, AutoSwitch HA).  The brokers  *)
(* are peers: each has its own commit log, epoch cache and role, and the   *)
(* controller (a Raft-replicated register, modelled as one linearizable   *)
(* register) names the master, the master epoch and the SyncStateSet.     *)
(*                                                                         *)
(* The write path of one master (flush, transient pool, fsync errors) is  *)
(* the subject of AckOrder.tla; here every broker is ASYNC_FLUSH without   *)
(* the pool, acks are page-cache acks, and the ack policy is controller    *)
(* mode's ALL_IN_SYNC (allAckInSyncStateSet = true).                       *)
(*                                                                         *)
(* Offsets count records: record k of a log occupies [k-1, k).  A record  *)
(* is the id of the request that put it (ids grow in put order, across    *)
(* masters), so two logs agree at an offset iff they hold the same id.    *)
(* An epoch-cache entry <<e, s>> says epoch e starts at offset s.          *)
(*                                                                         *)
(* This module has no bounds: MCAckOrderFailover.tla and the cfgs do.     *)
(***************************************************************************)
EXTENDS Naturals, Sequences, FiniteSets

CONSTANTS
    Brokers,        \* the broker group's members (model values)
    InitialMaster,  \* the master of epoch 1 (the first election happened before Init)
    NoBroker        \* model value: "no master" (controller) / "follows nobody" (broker)

\* Bug switches, FALSE in every green cfg; each _bug cfg turns one on and must
\* fail with the property tla/manifest.json names.  docs/model.md maps each to
\* the RocketMQ issue (B-numbers are rocketmq.md's bug zoo).
CONSTANTS
    BugNoAllAck,               \* B10: controller mode without allAckInSyncStateSet
    BugCommittedSssOnly,       \* B11 (#5663): acks counted over the committed SSS only while altering
    BugConfirmOverConnected,   \* B12 (#6662): confirmOffset = min over the connected SSS members only
    BugTransferCursorNotReset, \* B13 (#9689): a new epoch leaves live connections on the old epoch
    BugTruncateNotDurable,     \* B14 (#10666): a handshake truncation does not survive a crash
    BugUncleanElection,        \* B16 (#4771): enableElectUncleanMaster, elect outside the SSS
    BugConfirmNotClamped,      \* B19 (#6703): recovery keeps the checkpoint's confirmOffset
    BugEpochFileNotDurable,    \* B21 (#10863): the epoch file is written without fsync
    BugElectKeepsEpoch,        \* plausible: ElectMaster does not increment masterEpoch (E2)
    BugEpochAppendUnchecked,   \* plausible: EpochFileCache.appendEntry without its order check (E1)
    BugAlterWithoutFencing,    \* plausible: AlterSyncStateSet without its compare-and-set (E3)
    BugSlaveConfirmFromMaxOffset, \* plausible: a slave takes confirmOffset from the master's max offset
    BugElectOnlyOnMasterDeath, \* plausible: no broker-requested election when there is no master
    BugShrinkBeforeCommit      \* plausible: a proposed shrink counts at once (acks over the proposal only)

VARIABLES
    \* --- controller (ReplicasInfoManager / SyncStateInfo) ---
    masterId,       \* the master, or NoBroker
    masterEpoch,    \* increments on every election (E2)
    syncStateSet,   \* the SyncStateSet (SSS)
    sssEpoch,       \* increments on every SSS change
    reachable,      \* broker -> it can talk to the controller (heartbeats, RPCs)
    \* --- each broker's ReplicasManager / AutoSwitchHAService ---
    up,             \* broker -> the process runs
    role,           \* broker -> "MASTER" | "SLAVE" (a restarted broker is a SLAVE of nobody)
    bMasterId,      \* broker -> the master it believes in (itself when master)
    bEpoch,         \* broker -> the masterEpoch it last applied (0 after a restart)
    bSSS,           \* broker -> its local SSS, the last one the controller confirmed (masters)
    bSssEpoch,      \* broker -> the sssEpoch of bSSS
    bRemoteSSS,     \* broker -> an AlterSyncStateSet proposal in flight ({} when none)
    alterPending,   \* broker -> the proposal's RPC has not been handled by the controller yet
    \* --- each broker's store ---
    blog,           \* broker -> its commit log (page cache; a process crash keeps it)
    epochCache,     \* broker -> EpochFileCache: <<epoch, startOffset>> entries
    confirm,        \* broker -> confirmOffset: consumers read below it
    staleTail,      \* broker -> records a truncation left on disk ({} unless BugTruncateNotDurable)
    \* --- HA connections (AutoSwitchHAConnection / AutoSwitchHAClient) ---
    connected,      \* broker -> its HA client is in TRANSFER with bMasterId (slaves)
    ack,            \* broker -> the slaveAckOffset its master holds for that connection
    cursorEpoch,    \* broker -> currentTransferEpoch fixed at connect (0 unless BugTransferCursorNotReset)
    \* --- requests and ghost history, for properties only ---
    reqs,           \* id -> [off, status, epoch, master]: where and by whom it was put
    inv_pcLost,     \* ids some broker lost with its page cache (power loss)
    \* --- state-space counters (bounded in MCAckOrderFailover.tla) ---
    aux_ctrs

controllerVars == <<masterId, masterEpoch, syncStateSet, sssEpoch>>
viewVars       == <<role, bMasterId, bEpoch, bSSS, bSssEpoch, bRemoteSSS, alterPending>>
storeVars      == <<blog, epochCache, confirm, staleTail>>
haVars         == <<connected, ack, cursorEpoch>>
vars == <<masterId, masterEpoch, syncStateSet, sssEpoch, reachable, up,
          role, bMasterId, bEpoch, bSSS, bSssEpoch, bRemoteSSS, alterPending,
          blog, epochCache, confirm, staleTail, connected, ack, cursorEpoch,
          reqs, inv_pcLost, aux_ctrs>>

Master == "MASTER"
Slave  == "SLAVE"

PutOK             == "PUT_OK"
FlushSlaveTimeout == "FLUSH_SLAVE_TIMEOUT"   \* GroupTransferService deadline (5.x never SLAVE_NOT_AVAILABLE)
ClientTimeout     == "CLIENT_TIMEOUT"        \* the producer's sendMsgTimeout: the broker died
Waiting           == "WAITING"
Statuses == {PutOK, FlushSlaveTimeout, ClientTimeout}

Request == [off : Nat, status : Statuses \cup {Waiting}, epoch : Nat, master : Brokers]
EpochEntry == Nat \X Nat

CounterKinds == {"brokerCrash", "powerLoss", "cutOff", "disconnect", "sssProposal", "election"}

TypeOK ==
    /\ masterId \in Brokers \cup {NoBroker}
    /\ masterEpoch \in Nat /\ sssEpoch \in Nat
    /\ syncStateSet \subseteq Brokers
    /\ reachable \in [Brokers -> BOOLEAN]
    /\ up \in [Brokers -> BOOLEAN]
    /\ role \in [Brokers -> {Master, Slave}]
    /\ bMasterId \in [Brokers -> Brokers \cup {NoBroker}]
    /\ bEpoch \in [Brokers -> Nat] /\ bSssEpoch \in [Brokers -> Nat]
    /\ bSSS \in [Brokers -> SUBSET Brokers] /\ bRemoteSSS \in [Brokers -> SUBSET Brokers]
    /\ alterPending \in [Brokers -> BOOLEAN]
    /\ blog \in [Brokers -> Seq(Nat)] /\ staleTail \in [Brokers -> Seq(Nat)]
    /\ epochCache \in [Brokers -> Seq(EpochEntry)]
    /\ confirm \in [Brokers -> Nat]
    /\ connected \in [Brokers -> BOOLEAN]
    /\ ack \in [Brokers -> Nat] /\ cursorEpoch \in [Brokers -> Nat]
    /\ reqs \in Seq(Request)
    /\ inv_pcLost \subseteq Nat
    /\ aux_ctrs \in [CounterKinds -> Nat]

ConfigOK ==
    /\ InitialMaster \in Brokers
    /\ NoBroker \notin Brokers
=============================================================================
