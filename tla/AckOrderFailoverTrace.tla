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

\* The state a line observed: none, or "never" (a value no spec state holds), or the variables
\* that differ from the state before the step (all of them after a line without a state).
Field(o, name, current) == IF name \in DOMAIN o.s THEN o.s[name] ELSE current

Observed(o) ==
    CASE o.kind = "none"  -> TRUE
      [] o.kind = "never" -> FALSE
      [] o.kind = "state" ->
           /\ masterId' = Field(o, "masterId", masterId) /\ masterEpoch' = Field(o, "masterEpoch", masterEpoch)
           /\ syncStateSet' = Field(o, "syncStateSet", syncStateSet) /\ sssEpoch' = Field(o, "sssEpoch", sssEpoch)
           /\ reachable' = Field(o, "reachable", reachable) /\ up' = Field(o, "up", up)
           /\ role' = Field(o, "role", role) /\ bMasterId' = Field(o, "bMasterId", bMasterId)
           /\ bEpoch' = Field(o, "bEpoch", bEpoch) /\ bSSS' = Field(o, "bSSS", bSSS)
           /\ bSssEpoch' = Field(o, "bSssEpoch", bSssEpoch) /\ bRemoteSSS' = Field(o, "bRemoteSSS", bRemoteSSS)
           /\ alterPending' = Field(o, "alterPending", alterPending) /\ blog' = Field(o, "blog", blog)
           /\ epochCache' = Field(o, "epochCache", epochCache) /\ confirm' = Field(o, "confirm", confirm)
           /\ staleTail' = Field(o, "staleTail", staleTail) /\ connected' = Field(o, "connected", connected)
           /\ ack' = Field(o, "ack", ack) /\ cursorEpoch' = Field(o, "cursorEpoch", cursorEpoch)
           /\ reqs' = Field(o, "reqs", reqs) /\ inv_pcLost' = Field(o, "inv_pcLost", inv_pcLost)
           /\ aux_ctrs' = Field(o, "aux_ctrs", aux_ctrs)

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
