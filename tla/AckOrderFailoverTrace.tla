---------------------- MODULE AckOrderFailoverTrace ----------------------
(***************************************************************************)
(* Trace validation of AckOrderFailover: is a failover trace (the          *)
(* simulator's, spec/failover/tracecheck.py) a behaviour of the spec with  *)
(* every bug switch off?  The trace is the generated module                *)
(* AckOrderFailoverTraceData: the brokers (strings), the initial master,   *)
(* each step's action label (name and arguments) and, when its line has    *)
(* one, the state after it.  TraceNext takes step tpos + 1: the labelled   *)
(* action of AckOrderFailover, into the observed state.  Each state of a   *)
(* line determines the next, so TLC's search depth is the number of steps *)
(* explained, plus one (tla/failovertrace.py reads it).                    *)
(* No bounds: the trace bounds the behaviour.                              *)
(***************************************************************************)
EXTENDS Naturals, Sequences, FiniteSets, TLC, AckOrderFailoverTraceData

\* NoBroker, the model value, is the data module's constant (its states name it).

VARIABLES
    masterId, masterEpoch, syncStateSet, sssEpoch, reachable, up,
    role, bMasterId, bEpoch, bSSS, bSssEpoch, bRemoteSSS, alterPending,
    blog, epochCache, confirm, staleTail, connected, ack, cursorEpoch,
    reqs, inv_pcLost, aux_ctrs,
    tpos            \* the steps of the trace taken so far

FO == INSTANCE AckOrderFailover WITH
        Brokers <- TraceBrokers, InitialMaster <- TraceInitialMaster,
        BugNoAllAck <- FALSE, BugCommittedSssOnly <- FALSE, BugConfirmOverConnected <- FALSE,
        BugTransferCursorNotReset <- FALSE, BugTruncateNotDurable <- FALSE, BugUncleanElection <- FALSE,
        BugConfirmNotClamped <- FALSE, BugEpochFileNotDurable <- FALSE, BugElectKeepsEpoch <- FALSE,
        BugEpochAppendUnchecked <- FALSE, BugAlterWithoutFencing <- FALSE,
        BugSlaveConfirmFromMaxOffset <- FALSE, BugElectOnlyOnMasterDeath <- FALSE,
        BugShrinkBeforeCommit <- FALSE

ASSUME FO!ConfigOK

TraceInit == FO!Init /\ tpos = 0

\* The action a label names (spec/failover/labels.py ACTIONS: the same names and arities).
Act(a, x) ==
    CASE a = "Put"                   -> FO!Put(x[1])
      [] a = "ChangeToMaster"        -> FO!ChangeToMaster(x[1])
      [] a = "ChangeToSlave"         -> FO!ChangeToSlave(x[1])
      [] a = "ChangeSyncStateSet"    -> FO!ChangeSyncStateSet(x[1])
      [] a = "ReplicaConnect"        -> FO!ReplicaConnect(x[1])
      [] a = "Transfer"              -> FO!Transfer(x[1])
      [] a = "ReplicaAck"            -> FO!ReplicaAck(x[1])
      [] a = "ReplicaDisconnect"     -> FO!ReplicaDisconnect(x[1])
      [] a = "ShrinkSyncStateSet"    -> FO!ShrinkSyncStateSet(x[1], x[2])
      [] a = "ExpandSyncStateSet"    -> FO!ExpandSyncStateSet(x[1], x[2])
      [] a = "AlterSyncStateSet"     -> FO!AlterSyncStateSet(x[1])
      [] a = "BrokerCrash"           -> FO!BrokerCrash(x[1])
      [] a = "BrokerPowerLoss"       -> FO!BrokerPowerLoss(x[1])
      [] a = "BrokerRestart"         -> FO!BrokerRestart(x[1])
      [] a = "CutFromController"     -> FO!CutFromController(x[1])
      [] a = "ReconnectToController" -> FO!ReconnectToController(x[1])
      [] a = "Respond"               -> x[1] \in DOMAIN reqs /\ FO!Respond(x[1])
      [] a = "Timeout"               -> x[1] \in DOMAIN reqs /\ FO!Timeout(x[1])
      [] a = "ElectMaster"           -> FO!ElectMaster

\* The state a line observed (when it has one; "never": a value no spec state holds).
Observed(o) ==
    CASE o.kind = "none"  -> TRUE
      [] o.kind = "never" -> FALSE
      [] o.kind = "state" ->
           LET s == o.s IN
           /\ masterId' = s.masterId /\ masterEpoch' = s.masterEpoch
           /\ syncStateSet' = s.syncStateSet /\ sssEpoch' = s.sssEpoch
           /\ reachable' = s.reachable /\ up' = s.up /\ role' = s.role
           /\ bMasterId' = s.bMasterId /\ bEpoch' = s.bEpoch /\ bSSS' = s.bSSS
           /\ bSssEpoch' = s.bSssEpoch /\ bRemoteSSS' = s.bRemoteSSS /\ alterPending' = s.alterPending
           /\ blog' = s.blog /\ epochCache' = s.epochCache /\ confirm' = s.confirm
           /\ staleTail' = s.staleTail /\ connected' = s.connected /\ ack' = s.ack
           /\ cursorEpoch' = s.cursorEpoch /\ reqs' = s.reqs /\ inv_pcLost' = s.inv_pcLost
           /\ aux_ctrs' = s.aux_ctrs

TraceNext ==
    /\ tpos < Len(TraceSteps)
    /\ Act(TraceSteps[tpos + 1].action, TraceSteps[tpos + 1].args)
    /\ Observed(TraceSteps[tpos + 1].observed)
    /\ tpos' = tpos + 1

TraceView == <<masterId, masterEpoch, syncStateSet, sssEpoch, reachable, up,
               role, bMasterId, bEpoch, bSSS, bSssEpoch, bRemoteSSS, alterPending,
               blog, epochCache, confirm, staleTail, connected, ack, cursorEpoch,
               reqs, inv_pcLost, aux_ctrs, tpos>>
=============================================================================
