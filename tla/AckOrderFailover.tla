-------------------------- MODULE AckOrderFailover --------------------------
(***************************************************************************)
(* Controller-driven failover of one RocketMQ 5 broker group: the         *)
(* controller's elections and SyncStateSet changes, the brokers' role     *)
(* changes, epochs and epoch caches, the AutoSwitch handshake that        *)
(* truncates a demoted master or a lagging slave, replication and acks    *)
(* under allAckInSyncStateSet, confirmOffset, and the failures: process   *)
(* crash, power loss, a broker cut off from the controller, an HA link    *)
(* drop.                                                                   *)
(*                                                                         *)
(* Every action is headed by WHO performs it and the RocketMQ code it      *)
(* abstracts (apache/rocketmq develop @8fc57f14; ../shared/research/       *)
(* rocketmq.md sections 2.4-2.8 and 3.12-3.14).  The Python twin          *)
(* spec/failover/actions.py has one function per action, same name.       *)
(***************************************************************************)
EXTENDS AckOrderFailoverFunctions

Init ==
    /\ masterId = InitialMaster
    /\ masterEpoch = 1
    /\ syncStateSet = {InitialMaster}
    /\ sssEpoch = 1
    /\ reachable = [b \in Brokers |-> TRUE]
    /\ up = [b \in Brokers |-> TRUE]
    /\ role = [b \in Brokers |-> IF b = InitialMaster THEN Master ELSE Slave]
    /\ bMasterId = [b \in Brokers |-> InitialMaster]
    /\ bEpoch = [b \in Brokers |-> 1]
    /\ bSSS = [b \in Brokers |-> IF b = InitialMaster THEN {InitialMaster} ELSE {}]
    /\ bSssEpoch = [b \in Brokers |-> IF b = InitialMaster THEN 1 ELSE 0]
    /\ bRemoteSSS = [b \in Brokers |-> {}]
    /\ alterPending = [b \in Brokers |-> FALSE]
    /\ blog = [b \in Brokers |-> <<>>]
    /\ epochCache = [b \in Brokers |-> IF b = InitialMaster THEN <<<<1, 0>>>> ELSE <<>>]
    /\ confirm = [b \in Brokers |-> 0]
    /\ staleTail = [b \in Brokers |-> <<>>]
    /\ connected = [b \in Brokers |-> FALSE]
    /\ ack = [b \in Brokers |-> 0]
    /\ cursorEpoch = [b \in Brokers |-> 0]
    /\ reqs = <<>>
    /\ inv_pcLost = {}
    /\ aux_ctrs = [k \in CounterKinds |-> 0]

\* A write overwrites the first record a non-durable truncation left on disk.
Overwrite(t) == IF t = <<>> THEN t ELSE Tail(t)

(***************************************************************************)
(* ACTION: Put(m)                                                          *)
(* WHO:    producer -> a broker that believes it is master                 *)
(* CODE:   SendMessageProcessor -> CommitLog.asyncPutMessage (CL L947-1122) *)
(* The record is appended to m's page cache in m's epoch and the request  *)
(* waits for its replica leg.  A master cut off from the controller still *)
(* takes writes: nothing fences it until it learns a newer epoch (B10).   *)
(* A master alone in its SSS confirms the record at once.                 *)
(***************************************************************************)
Put(m) ==
    /\ up[m] /\ role[m] = Master
    /\ LET id  == Len(reqs) + 1
           off == Len(blog[m]) + 1
       IN /\ blog' = [blog EXCEPT ![m] = Append(@, id)]
          /\ staleTail' = [staleTail EXCEPT ![m] = Overwrite(@)]
          /\ reqs' = Append(reqs, [off |-> off, status |-> Waiting, epoch |-> bEpoch[m], master |-> m])
          /\ confirm' = [confirm EXCEPT ![m] = IF SSSView(m) \ {m} = {} THEN off ELSE @]
    /\ UNCHANGED <<controllerVars, reachable, up, viewVars, epochCache, haVars, inv_pcLost, aux_ctrs>>

(***************************************************************************)
(* ACTION: Respond(i)                                                      *)
(* WHO:    the master's GroupTransferService                               *)
(* CODE:   GroupTransferService.doWaitTransfer (GTS L97-118), thenCombine  *)
(* PUT_OK once every other member of the SSS view (local, and proposed    *)
(* while an alter is in flight) has a connection whose ack covers the     *)
(* record.  Only the master that took the put answers, and only in the    *)
(* epoch it took it in (a request outliving a role change times out).     *)
(***************************************************************************)
CanRespond(i) ==
    LET m == reqs[i].master
    IN /\ up[m] /\ role[m] = Master /\ bEpoch[m] = reqs[i].epoch
       /\ AckCovered(m, reqs[i].off)

Respond(i) ==
    /\ reqs[i].status = Waiting
    /\ CanRespond(i)
    /\ reqs' = [reqs EXCEPT ![i].status = PutOK]
    /\ UNCHANGED <<controllerVars, reachable, up, viewVars, storeVars, haVars, inv_pcLost, aux_ctrs>>

(***************************************************************************)
(* ACTION: Timeout(i)                                                      *)
(* WHO:    the master's GroupTransferService, the request's deadline       *)
(* CODE:   GTS deadLine check -> FLUSH_SLAVE_TIMEOUT                       *)
(* The deadline passes while the replica leg is still pending.            *)
(***************************************************************************)
Timeout(i) ==
    /\ reqs[i].status = Waiting
    /\ ~CanRespond(i)
    /\ reqs' = [reqs EXCEPT ![i].status = FlushSlaveTimeout]
    /\ UNCHANGED <<controllerVars, reachable, up, viewVars, storeVars, haVars, inv_pcLost, aux_ctrs>>

(***************************************************************************)
(* ACTION: ReplicaConnect(s)                                               *)
(* WHO:    slave s's AutoSwitchHAClient and its master's HAConnection       *)
(* CODE:   AutoSwitchHAClient HANDSHAKE: doTruncate (ASCli L435-476),      *)
(*         EpochFileCache.findConsistentPoint (EFC L227-245); the first    *)
(*         TRANSFER header (ASCli L537-574); ASConn first report           *)
(* The master sends its epoch entries and max offset; the slave truncates *)
(* its log and epoch cache to the consistent point, records the epoch of  *)
(* the first header (a heartbeat), takes confirmOffset from it, and its   *)
(* first report becomes its ack.  No common epoch (only a lost epoch file *)
(* leaves one): RocketMQ retries every 2 s, forever; the reference cuts    *)
(* the whole log, durably, and follows from 0 (FollowerCore.epoch_reply), *)
(* a liveness choice the spec makes too.  A master whose entries do not   *)
(* cover where the stream would start is refused (the step is not taken). *)
(* Under B14 the truncated records stay on disk.                           *)
(***************************************************************************)
ReplicaConnect(s) ==
    LET m == bMasterId[s]
        point == ConsistentPoint(s, m)
        p == IF point < 0 THEN 0 ELSE point
        disk == blog[s] \o staleTail[s]
        ci == CoveringIndex(epochCache[m], p)
        header == epochCache[m][ci]
        connected2 == [connected EXCEPT ![s] = TRUE]
        ack2 == [ack EXCEPT ![s] = p]
    IN /\ up[s] /\ role[s] = Slave /\ m # NoBroker /\ ~connected[s]
       /\ up[m] /\ role[m] = Master
       /\ ci > 0
       /\ blog' = [blog EXCEPT ![s] = SubSeq(blog[s], 1, p)]
       /\ staleTail' = [staleTail EXCEPT ![s] = IF BugTruncateNotDurable /\ point >= 0
                                                THEN SubSeq(disk, p + 1, Len(disk)) ELSE <<>>]
       /\ epochCache' = [epochCache EXCEPT ![s] = AppendEntry(TruncateSuffixByOffset(@, p), header)]
       /\ connected' = connected2
       /\ ack' = ack2
       /\ cursorEpoch' = [cursorEpoch EXCEPT ![s] = IF BugTransferCursorNotReset
                                                    THEN LastEpoch(epochCache[m]) ELSE 0]
       /\ confirm' = [confirm EXCEPT
                        ![s] = Min(HeaderConfirm(m), p),
                        ![m] = IF s \in bSSS[m] THEN ConfirmWith(m, SSSView(m), connected2, ack2, @) ELSE @]
       /\ UNCHANGED <<controllerVars, reachable, up, viewVars, reqs, inv_pcLost, aux_ctrs>>

(***************************************************************************)
(* ACTION: Transfer(s)                                                     *)
(* WHO:    master HAConnection WriteSocketService -> slave HAClient        *)
(* CODE:   AutoSwitchHAConnection.transferToSlave (ASConn L564-623),       *)
(*         AutoSwitchHAClient TRANSFER (ASCli L537-574)                    *)
(* The next record goes out with the epoch entry covering its offset (one *)
(* record per step: a batch never spans two epochs, H2).  The slave       *)
(* appends the entry when the epoch is new to it, sets confirmOffset to    *)
(* min(the master's, its own max before the append), then appends.        *)
(***************************************************************************)
Transfer(s) ==
    LET m == bMasterId[s]
        o == Len(blog[s])
        label == TransferLabel(m, s, o)
    IN /\ up[s] /\ connected[s] /\ up[m] /\ role[m] = Master
       /\ o < Len(blog[m])
       /\ blog' = [blog EXCEPT ![s] = Append(@, blog[m][o + 1])]
       /\ staleTail' = [staleTail EXCEPT ![s] = Overwrite(@)]
       /\ epochCache' = [epochCache EXCEPT ![s] = IF label[1] = LastEpoch(@) THEN @ ELSE AppendEntry(@, label)]
       /\ confirm' = [confirm EXCEPT ![s] = Min(HeaderConfirm(m), o)]
       /\ UNCHANGED <<controllerVars, reachable, up, viewVars, haVars, reqs, inv_pcLost, aux_ctrs>>

(***************************************************************************)
(* ACTION: ReplicaAck(s)                                                   *)
(* WHO:    slave s reports; master HAConnection ReadSocketService          *)
(* CODE:   AutoSwitchHAClient.reportSlaveMaxOffset; ASConn L337-349,       *)
(*         ASHA.updateConfirmOffsetWhenSlaveAck                            *)
(* The slave reports its max offset (page cache); the master records the  *)
(* ack and, when the slave is in its local SSS, recomputes confirmOffset. *)
(***************************************************************************)
ReplicaAck(s) ==
    LET m == bMasterId[s]
        ack2 == [ack EXCEPT ![s] = Len(blog[s])]
    IN /\ up[s] /\ connected[s] /\ up[m] /\ role[m] = Master
       /\ ack[s] < Len(blog[s])
       /\ ack' = ack2
       /\ confirm' = [confirm EXCEPT ![m] = IF s \in bSSS[m] THEN ConfirmWith(m, SSSView(m), connected, ack2, @)
                                            ELSE @]
       /\ UNCHANGED <<controllerVars, reachable, up, viewVars, blog, epochCache, staleTail, connected,
                      cursorEpoch, reqs, inv_pcLost, aux_ctrs>>

(***************************************************************************)
(* ACTION: ReplicaDisconnect(s)                                            *)
(* WHO:    the network between slave s and its master                      *)
(* CODE:   HAConnection closed (socket error, haHousekeepingInterval)       *)
(* The master forgets the connection's ack; confirmOffset is kept.        *)
(***************************************************************************)
ReplicaDisconnect(s) ==
    /\ connected[s]
    /\ connected' = [connected EXCEPT ![s] = FALSE]
    /\ ack' = [ack EXCEPT ![s] = 0]
    /\ cursorEpoch' = [cursorEpoch EXCEPT ![s] = 0]
    /\ aux_ctrs' = [aux_ctrs EXCEPT !["disconnect"] = @ + 1]
    /\ UNCHANGED <<controllerVars, reachable, up, viewVars, storeVars, reqs, inv_pcLost>>

(***************************************************************************)
(* ACTION: ShrinkSyncStateSet(m, s)                                        *)
(* WHO:    master m's ReplicasManager (checkSyncStateSetAndDoReport, 5 s)  *)
(* CODE:   ASHA.maybeShrinkInSyncStateSet (L273-303), removeConnection      *)
(*         (L100-112), markSynchronizingSyncStateSet                       *)
(* A member without a connection, or not caught up, is dropped from a     *)
(* proposed set; the proposal is sent to the controller.  One proposal is *)
(* in flight at a time.                                                    *)
(***************************************************************************)
ShrinkSyncStateSet(m, s) ==
    /\ up[m] /\ role[m] = Master /\ bRemoteSSS[m] = {}
    /\ s \in bSSS[m] \ {m}
    /\ ~ConnectedTo(s, m) \/ ack[s] < Len(blog[m])
    /\ bRemoteSSS' = [bRemoteSSS EXCEPT ![m] = bSSS[m] \ {s}]
    /\ alterPending' = [alterPending EXCEPT ![m] = TRUE]
    /\ aux_ctrs' = [aux_ctrs EXCEPT !["sssProposal"] = @ + 1]
    /\ UNCHANGED <<controllerVars, reachable, up, role, bMasterId, bEpoch, bSSS, bSssEpoch,
                   storeVars, haVars, reqs, inv_pcLost>>

(***************************************************************************)
(* ACTION: ExpandSyncStateSet(m, s)                                        *)
(* WHO:    master m's HAConnection on slave s's report                     *)
(* CODE:   ASConn.maybeExpandInSyncStateSet (L214-220), ASHA L309-326       *)
(* A connected slave that has caught up (its ack is the master's max      *)
(* offset, at least confirmOffset and inside the current epoch) is added   *)
(* to a proposed set, which is sent to the controller.                    *)
(***************************************************************************)
ExpandSyncStateSet(m, s) ==
    /\ up[m] /\ role[m] = Master /\ bRemoteSSS[m] = {}
    /\ s \notin bSSS[m] /\ ConnectedTo(s, m)
    /\ ack[s] = Len(blog[m]) /\ ack[s] >= confirm[m] /\ ack[s] >= LastStart(epochCache[m])
    /\ bRemoteSSS' = [bRemoteSSS EXCEPT ![m] = bSSS[m] \cup {s}]
    /\ alterPending' = [alterPending EXCEPT ![m] = TRUE]
    /\ aux_ctrs' = [aux_ctrs EXCEPT !["sssProposal"] = @ + 1]
    /\ UNCHANGED <<controllerVars, reachable, up, role, bMasterId, bEpoch, bSSS, bSssEpoch,
                   storeVars, haVars, reqs, inv_pcLost>>

(***************************************************************************)
(* ACTION: AlterSyncStateSet(m)                                            *)
(* WHO:    the controller, on master m's request                           *)
(* CODE:   ReplicasInfoManager.alterSyncStateSet (RIM L110-191)            *)
(* A compare-and-set on (masterId, masterEpoch, sssEpoch); the new set    *)
(* must contain the master and only live brokers (E3).  On success the    *)
(* SSS and sssEpoch change and the reply is on its way (the master learns  *)
(* it in ChangeSyncStateSet); a refusal clears the master's proposal.     *)
(***************************************************************************)
AlterAccepted(m) ==
    /\ BugAlterWithoutFencing \/ (masterId = m /\ masterEpoch = bEpoch[m] /\ sssEpoch = bSssEpoch[m])
    /\ m \in bRemoteSSS[m]
    /\ \A b \in bRemoteSSS[m] : Alive(b)

AlterSyncStateSet(m) ==
    /\ alterPending[m] /\ up[m] /\ reachable[m]
    /\ alterPending' = [alterPending EXCEPT ![m] = FALSE]
    /\ IF AlterAccepted(m)
       THEN /\ syncStateSet' = bRemoteSSS[m]
            /\ sssEpoch' = sssEpoch + 1
            /\ UNCHANGED <<bRemoteSSS, confirm>>
       ELSE /\ bRemoteSSS' = [bRemoteSSS EXCEPT ![m] = {}]
            /\ confirm' = [confirm EXCEPT ![m] = IF bSSS[m] \ {m} = {} THEN Len(blog[m]) ELSE @]
            /\ UNCHANGED <<syncStateSet, sssEpoch>>
    /\ UNCHANGED <<masterId, masterEpoch, reachable, up, role, bMasterId, bEpoch, bSSS, bSssEpoch,
                   blog, epochCache, staleTail, haVars, reqs, inv_pcLost, aux_ctrs>>

(***************************************************************************)
(* ACTION: ChangeSyncStateSet(m)                                           *)
(* WHO:    master m's ReplicasManager: the alter reply, or the periodic    *)
(*         metadata sync                                                   *)
(* CODE:   RM.changeSyncStateSet -> ASHA.setSyncStateSet (clears the       *)
(*         synchronizing flag, recomputes confirmOffset)                   *)
(***************************************************************************)
ChangeSyncStateSet(m) ==
    /\ up[m] /\ reachable[m] /\ role[m] = Master
    /\ masterId = m /\ masterEpoch = bEpoch[m] /\ sssEpoch > bSssEpoch[m]
    /\ bSSS' = [bSSS EXCEPT ![m] = syncStateSet]
    /\ bSssEpoch' = [bSssEpoch EXCEPT ![m] = sssEpoch]
    /\ bRemoteSSS' = [bRemoteSSS EXCEPT ![m] = {}]
    /\ alterPending' = [alterPending EXCEPT ![m] = FALSE]
    /\ confirm' = [confirm EXCEPT ![m] = ConfirmWith(m, syncStateSet, connected, ack, @)]
    /\ UNCHANGED <<controllerVars, reachable, up, role, bMasterId, bEpoch, blog, epochCache, staleTail,
                   haVars, reqs, inv_pcLost, aux_ctrs>>

(***************************************************************************)
(* ACTION: ElectMaster                                                     *)
(* WHO:    the controller (on an inactive master, or a broker's request    *)
(*         when there is no master)                                        *)
(* CODE:   ReplicasInfoManager.electMaster (RIM L193-276),                 *)
(*         DefaultElectPolicy.elect (DEP L72-119), SyncStateInfo L46-54    *)
(* Only when the master is not alive (dead, or cut off from the           *)
(* controller).  The new master is any live SSS member (E4); masterEpoch  *)
(* + 1, SSS := {new master}, sssEpoch + 1.  With no candidate the master  *)
(* is cleared and the epoch still bumps (E2).                              *)
(***************************************************************************)
ElectMaster ==
    /\ IF masterId = NoBroker THEN TRUE ELSE ~Alive(masterId)
    /\ ~(BugElectOnlyOnMasterDeath /\ masterId = NoBroker)
    /\ LET pool  == IF BugUncleanElection THEN Brokers ELSE syncStateSet
           cands == {b \in pool : Alive(b)}
           next  == IF BugElectKeepsEpoch THEN masterEpoch ELSE masterEpoch + 1
       IN IF cands # {}
          THEN \E c \in cands :
                 /\ masterId' = c
                 /\ masterEpoch' = next
                 /\ syncStateSet' = {c}
                 /\ sssEpoch' = sssEpoch + 1
          ELSE /\ masterId # NoBroker
               /\ masterId' = NoBroker
               /\ masterEpoch' = next
               /\ UNCHANGED <<syncStateSet, sssEpoch>>
    /\ aux_ctrs' = [aux_ctrs EXCEPT !["election"] = @ + 1]
    /\ UNCHANGED <<reachable, up, viewVars, storeVars, haVars, reqs, inv_pcLost>>

(***************************************************************************)
(* ACTION: ChangeToMaster(b)                                               *)
(* WHO:    broker b's ReplicasManager, on metadata naming it master         *)
(* CODE:   RM.changeToMaster (RM L225-262), ASHA.changeToMaster (L114-160), *)
(*         changeToMasterWhenLastRoleIsMaster                              *)
(* Only for a larger epoch (E5).  b takes the controller's SSS, stops its  *)
(* HA client, drops epoch entries of this or later epochs and appends     *)
(* <<newEpoch, its max offset>>.  Its un-acked tail is kept.  A master    *)
(* re-elected keeps its connections (B13 is what that does to them).       *)
(***************************************************************************)
ChangeToMaster(b) ==
    LET wasMaster == role[b] = Master
        connected2 == IF wasMaster THEN connected ELSE [connected EXCEPT ![b] = FALSE]
        ack2 == IF wasMaster THEN ack ELSE [ack EXCEPT ![b] = 0]
    IN /\ up[b] /\ reachable[b] /\ masterId = b /\ masterEpoch > bEpoch[b]
       /\ role' = [role EXCEPT ![b] = Master]
       /\ bMasterId' = [bMasterId EXCEPT ![b] = b]
       /\ bEpoch' = [bEpoch EXCEPT ![b] = masterEpoch]
       /\ bSSS' = [bSSS EXCEPT ![b] = syncStateSet]
       /\ bSssEpoch' = [bSssEpoch EXCEPT ![b] = sssEpoch]
       /\ bRemoteSSS' = [bRemoteSSS EXCEPT ![b] = {}]
       /\ alterPending' = [alterPending EXCEPT ![b] = FALSE]
       /\ epochCache' = [epochCache EXCEPT ![b] =
                           AppendEntry(TruncateSuffixByEpoch(@, masterEpoch), <<masterEpoch, Len(blog[b])>>)]
       /\ connected' = connected2
       /\ ack' = ack2
       /\ cursorEpoch' = IF wasMaster THEN cursorEpoch ELSE [cursorEpoch EXCEPT ![b] = 0]
       /\ confirm' = [confirm EXCEPT ![b] = ConfirmWith(b, syncStateSet, connected2, ack2, @)]
       /\ UNCHANGED <<controllerVars, reachable, up, blog, staleTail, reqs, inv_pcLost, aux_ctrs>>

(***************************************************************************)
(* ACTION: ChangeToSlave(b)                                                *)
(* WHO:    broker b's ReplicasManager, on metadata naming another master    *)
(* CODE:   RM.changeToSlave (RM L283-346), ASHA.changeToSlave,             *)
(*         changeToSlaveWhenMasterNotChange                                *)
(* Only for a larger epoch (E5).  If b already follows that master only    *)
(* the epoch is recorded.  Otherwise b follows the new master: its HA      *)
(* client restarts (a new handshake, which truncates), and a demoted       *)
(* master destroys its slaves' connections.                                *)
(***************************************************************************)
ChangeToSlave(b) ==
    /\ up[b] /\ reachable[b] /\ masterId \notin {b, NoBroker} /\ masterEpoch > bEpoch[b]
    /\ bEpoch' = [bEpoch EXCEPT ![b] = masterEpoch]
    /\ IF role[b] = Slave /\ bMasterId[b] = masterId
       THEN UNCHANGED <<role, bMasterId, bSSS, bSssEpoch, bRemoteSSS, alterPending, haVars>>
       ELSE LET drop == {s \in Brokers : s = b \/ (role[b] = Master /\ bMasterId[s] = b)}
            IN /\ role' = [role EXCEPT ![b] = Slave]
               /\ bMasterId' = [bMasterId EXCEPT ![b] = masterId]
               /\ bSSS' = [bSSS EXCEPT ![b] = {}]
               /\ bSssEpoch' = [bSssEpoch EXCEPT ![b] = 0]
               /\ bRemoteSSS' = [bRemoteSSS EXCEPT ![b] = {}]
               /\ alterPending' = [alterPending EXCEPT ![b] = FALSE]
               /\ connected' = [s \in Brokers |-> IF s \in drop THEN FALSE ELSE connected[s]]
               /\ ack' = [s \in Brokers |-> IF s \in drop THEN 0 ELSE ack[s]]
               /\ cursorEpoch' = [s \in Brokers |-> IF s \in drop THEN 0 ELSE cursorEpoch[s]]
    /\ UNCHANGED <<controllerVars, reachable, up, storeVars, reqs, inv_pcLost, aux_ctrs>>

\* What a broker's process takes with it: its role, its view of the controller
\* and its connections (a master's slaves lose theirs); waiting producers time out.
Die(b) ==
    LET drop == {s \in Brokers : s = b \/ (role[b] = Master /\ bMasterId[s] = b)}
    IN /\ up' = [up EXCEPT ![b] = FALSE]
       /\ role' = [role EXCEPT ![b] = Slave]
       /\ bMasterId' = [bMasterId EXCEPT ![b] = NoBroker]
       /\ bEpoch' = [bEpoch EXCEPT ![b] = 0]
       /\ bSSS' = [bSSS EXCEPT ![b] = {}]
       /\ bSssEpoch' = [bSssEpoch EXCEPT ![b] = 0]
       /\ bRemoteSSS' = [bRemoteSSS EXCEPT ![b] = {}]
       /\ alterPending' = [alterPending EXCEPT ![b] = FALSE]
       /\ connected' = [s \in Brokers |-> IF s \in drop THEN FALSE ELSE connected[s]]
       /\ ack' = [s \in Brokers |-> IF s \in drop THEN 0 ELSE ack[s]]
       /\ cursorEpoch' = [s \in Brokers |-> IF s \in drop THEN 0 ELSE cursorEpoch[s]]
       /\ reqs' = AbortAt(b)

(***************************************************************************)
(* ACTION: BrokerCrash(b)                                                  *)
(* WHO:    broker b's process dies (kill -9, OOM)                          *)
(* CODE:   (environment); the controller's heartbeat manager notices       *)
(* The page cache survives: log, epoch file and checkpoint are kept.      *)
(***************************************************************************)
BrokerCrash(b) ==
    /\ up[b]
    /\ Die(b)
    /\ aux_ctrs' = [aux_ctrs EXCEPT !["brokerCrash"] = @ + 1]
    /\ UNCHANGED <<controllerVars, reachable, storeVars, inv_pcLost>>

(***************************************************************************)
(* ACTION: BrokerPowerLoss(b)                                              *)
(* WHO:    broker b's machine loses power                                  *)
(* CODE:   (environment)                                                   *)
(* Acks are page-cache acks and nothing here is fsync'd on the ack path:  *)
(* any prefix of the log survives (ASYNC_FLUSH).  The epoch file is        *)
(* written with fsync, so recovery finds it and drops entries for lost     *)
(* records; under B21 the file may have lost its last write.  The records  *)
(* lost are remembered (inv_pcLost): the durability properties promise     *)
(* nothing for them.                                                       *)
(***************************************************************************)
BrokerPowerLoss(b) ==
    /\ up[b]
    /\ Die(b)
    /\ \E keep \in 0..Len(blog[b]), lastLost \in BOOLEAN :
         /\ lastLost => BugEpochFileNotDurable /\ epochCache[b] # <<>>
         /\ blog' = [blog EXCEPT ![b] = SubSeq(@, 1, keep)]
         /\ inv_pcLost' = inv_pcLost \cup {blog[b][k] : k \in (keep + 1)..Len(blog[b])}
         /\ epochCache' = [epochCache EXCEPT ![b] =
                             TruncateBeyond(IF lastLost THEN SubSeq(@, 1, Len(@) - 1) ELSE @, keep)]
    /\ staleTail' = [staleTail EXCEPT ![b] = <<>>]
    /\ aux_ctrs' = [aux_ctrs EXCEPT !["powerLoss"] = @ + 1]
    /\ UNCHANGED <<controllerVars, reachable, confirm>>

(***************************************************************************)
(* ACTION: BrokerRestart(b)                                                *)
(* WHO:    broker b's process starts again                                 *)
(* CODE:   DefaultMessageStore.load/recover (CL L731-862, the #6703 clamp), *)
(*         EpochFileCache.initCacheFromFile, RunningFlags fenced           *)
(* Recovery scans the log (under B14 it finds the records a truncation    *)
(* left on disk) and clamps the checkpoint's confirmOffset into the log    *)
(* (B19 does not).  The broker comes back fenced, a slave of nobody, until *)
(* it learns the controller's metadata.  It restarts only after the       *)
(* controller has noticed its death (heartbeat timeout, 10 s): a master    *)
(* that died is replaced or cleared first.                                 *)
(***************************************************************************)
BrokerRestart(b) ==
    LET recovered == IF BugTruncateNotDurable THEN blog[b] \o staleTail[b] ELSE blog[b]
    IN /\ ~up[b] /\ masterId # b
       /\ up' = [up EXCEPT ![b] = TRUE]
       /\ blog' = [blog EXCEPT ![b] = recovered]
       /\ staleTail' = [staleTail EXCEPT ![b] = <<>>]
       /\ confirm' = [confirm EXCEPT ![b] = IF BugConfirmNotClamped THEN @ ELSE Min(@, Len(recovered))]
       /\ UNCHANGED <<controllerVars, reachable, viewVars, epochCache, haVars, reqs, inv_pcLost, aux_ctrs>>

(***************************************************************************)
(* ACTION: CutFromController(b)                                            *)
(* WHO:    the network between broker b and the controller                 *)
(* CODE:   (environment); BrokerHeartbeatManager expires the broker         *)
(* The broker keeps running and believes what it believed; the controller  *)
(* counts it as not alive.  A master cut off keeps taking writes (#7017).  *)
(***************************************************************************)
CutFromController(b) ==
    /\ reachable[b]
    /\ reachable' = [reachable EXCEPT ![b] = FALSE]
    /\ aux_ctrs' = [aux_ctrs EXCEPT !["cutOff"] = @ + 1]
    /\ UNCHANGED <<controllerVars, up, viewVars, storeVars, haVars, reqs, inv_pcLost>>

(***************************************************************************)
(* ACTION: ReconnectToController(b)                                        *)
(* WHO:    the network heals                                               *)
(* CODE:   (environment); the next heartbeat registers the broker as alive  *)
(***************************************************************************)
ReconnectToController(b) ==
    /\ ~reachable[b]
    /\ reachable' = [reachable EXCEPT ![b] = TRUE]
    /\ UNCHANGED <<controllerVars, up, viewVars, storeVars, haVars, reqs, inv_pcLost, aux_ctrs>>

ControllerNext ==
    \/ ElectMaster
    \/ \E m \in Brokers : AlterSyncStateSet(m)

BrokerNext ==
    \E b \in Brokers :
        \/ Put(b) \/ ChangeToMaster(b) \/ ChangeToSlave(b) \/ ChangeSyncStateSet(b)
        \/ ReplicaConnect(b) \/ Transfer(b) \/ ReplicaAck(b) \/ ReplicaDisconnect(b)
        \/ \E s \in Brokers : ShrinkSyncStateSet(b, s) \/ ExpandSyncStateSet(b, s)
        \/ BrokerCrash(b) \/ BrokerPowerLoss(b) \/ BrokerRestart(b)
        \/ CutFromController(b) \/ ReconnectToController(b)

RequestNext == \E i \in DOMAIN reqs : Respond(i) \/ Timeout(i)

Next == ControllerNext \/ BrokerNext \/ RequestNext

\* Fairness only on the protocol's progress and on healing: puts, crashes,
\* cuts, link drops and SSS proposals are the environment's or a timer's
\* choice and may never happen.
RespondIf(i) == i \in DOMAIN reqs /\ Respond(i)
TimeoutIf(i) == i \in DOMAIN reqs /\ Timeout(i)

FairnessOver(ids) ==
    /\ WF_vars(ElectMaster)
    /\ \A b \in Brokers :
         /\ WF_vars(AlterSyncStateSet(b)) /\ WF_vars(ChangeSyncStateSet(b))
         /\ WF_vars(ChangeToMaster(b)) /\ WF_vars(ChangeToSlave(b))
         /\ WF_vars(ReplicaConnect(b)) /\ WF_vars(Transfer(b)) /\ WF_vars(ReplicaAck(b))
         /\ WF_vars(BrokerRestart(b)) /\ WF_vars(ReconnectToController(b))
    /\ \A i \in ids : WF_vars(RespondIf(i)) /\ WF_vars(TimeoutIf(i))

SpecOver(ids) == Init /\ [][Next]_vars /\ FairnessOver(ids)
=============================================================================
