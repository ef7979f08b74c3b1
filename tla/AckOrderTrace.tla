--------------------------- MODULE AckOrderTrace ---------------------------
(***************************************************************************)
(* Trace validation (CCF / etcd style): the behaviours of the bound-free   *)
(* spec (AckOrder, every bug switch off) that match an implementation      *)
(* trace step by step.  `ackorder trace-check` writes the traces as the    *)
(* literal sequences Traces[1], Traces[2], ... of a generated module       *)
(* AckOrderTraceData (TLC 2.15 reads no JSON), each with its broker's      *)
(* configuration Configs[c], with which the spec is instantiated (S(c)).   *)
(* Each behaviour follows one trace (t), so one TLC run checks a batch of  *)
(* traces, whatever their configurations, and each keeps its own verdict.  *)
(*                                                                         *)
(* Each element of a trace is one spec step:                               *)
(*   a  : the actions that may explain it, <<name, parameter>> pairs       *)
(*   o  : observations of the new state, each linear in what changed:      *)
(*          [f |-> "eq",   v, k, x]  the variable (entry k) is now x       *)
(*          [f |-> "app",  v, k, x]  ... is what it was with x appended    *)
(*          [f |-> "take", v, k, n, x] its first n elements, then x        *)
(*          [f |-> "grow", v, k, x]  longer by x, which ends it (reqs)     *)
(*          [f |-> "fld",  v, k, i, n, x] reqs'[i][n] = x                  *)
(*   m  : the (variable, entry) pairs the observations mention             *)
(*   ob : the pairs the writing process observes; those it observes and    *)
(*        does not mention are unchanged, the others TLC searches          *)
(* Entry k is "" for a whole variable, or a replica of a per-replica one.  *)
(*                                                                         *)
(* A trace that claims to be complete must end where nothing is left       *)
(* waiting (EndOK, one more level: TraceEnd).                              *)
(*                                                                         *)
(* A segment of a long trace cut at its checkpoints (the whole state every *)
(* so many steps) starts at its checkpoint's state, Starts[c] (HasStart),  *)
(* and must end at the next one's, Ends[c] (HasEnd; one more level, as a   *)
(* complete trace's end), so that a checkpoint hides no unexplained step.  *)
(*                                                                         *)
(* No invariant is checked:                                                *)
(* the deepest position Reached prints for a trace says how many of its    *)
(* steps some behaviour explains (all of them, and the end: the trace is   *)
(* valid), and a second run prints the states before the first step none   *)
(* explains (ReportState; a counterexample would print the whole           *)
(* behaviour, quadratic in the trace's length).                            *)
(***************************************************************************)
EXTENDS AckOrderTraceData, TLC, Naturals, Sequences

VARIABLES mstate, log, committed, flushed, durable, writable, unwritten, landed, reqs,
          connected, ack, push2SlaveMaxOffset, syncStateSet, rlog, rUp, inv_responses, aux_ctrs
VARIABLE l      \* the position in Traces[t] of the next step to explain
VARIABLE t      \* which trace of the batch this behaviour explains

specVars == <<mstate, log, committed, flushed, durable, writable, unwritten, landed, reqs,
              connected, ack, push2SlaveMaxOffset, syncStateSet, rlog, rUp, inv_responses, aux_ctrs>>
traceVars == <<specVars, l, t>>

\* The bound-free spec with trace c's configuration, every bug switch off.
S(c) == INSTANCE AckOrderProperties WITH
    Replicas <- Configs[c].Replicas, FlushMode <- Configs[c].FlushMode, ReplMode <- Configs[c].ReplMode,
    TransientStorePool <- Configs[c].TransientStorePool, AckPolicy <- Configs[c].AckPolicy,
    InSyncReplicas <- Configs[c].InSyncReplicas, FileSize <- Configs[c].FileSize,
    CommitOnReplicaWait <- Configs[c].CommitOnReplicaWait,
    BugAckOnWrote <- FALSE,
    BugAckOnCommitted <- FALSE,
    BugTransferBeyondCommitted <- FALSE,
    BugAnyReplicaForAllInSync <- FALSE,
    BugTimeoutAsOK <- FALSE,
    BugFlushOneFileReleasesAll <- FALSE,
    BugRecoveryKeepsTorn <- FALSE,
    BugAcceptAckBeyondLog <- FALSE,
    BugHandshakeOffsetOnly <- FALSE,
    BugFlushIgnoresFsyncError <- FALSE,
    BugDoubleResponse <- FALSE,
    BugNoFlushDiskWatcher <- FALSE,
    BugFsyncCoversFailedWrite <- FALSE,
    BugAckCheckedAgainstWrote <- FALSE,
    BugFlushTimeoutHidesSlaveTimeout <- FALSE,
    BugHandshakeRefusesCaughtUp <- FALSE

Cur(v, k) ==
    LET x == CASE v = "mstate" -> mstate [] v = "log" -> log [] v = "committed" -> committed
               [] v = "flushed" -> flushed [] v = "durable" -> durable [] v = "writable" -> writable
               [] v = "unwritten" -> unwritten [] v = "landed" -> landed [] v = "reqs" -> reqs
               [] v = "connected" -> connected [] v = "ack" -> ack
               [] v = "push2SlaveMaxOffset" -> push2SlaveMaxOffset [] v = "syncStateSet" -> syncStateSet
               [] v = "rlog" -> rlog [] v = "rUp" -> rUp
    IN IF k = "" THEN x ELSE x[k]

Nxt(v, k) ==
    LET x == CASE v = "mstate" -> mstate' [] v = "log" -> log' [] v = "committed" -> committed'
               [] v = "flushed" -> flushed' [] v = "durable" -> durable' [] v = "writable" -> writable'
               [] v = "unwritten" -> unwritten' [] v = "landed" -> landed' [] v = "reqs" -> reqs'
               [] v = "connected" -> connected' [] v = "ack" -> ack'
               [] v = "push2SlaveMaxOffset" -> push2SlaveMaxOffset' [] v = "syncStateSet" -> syncStateSet'
               [] v = "rlog" -> rlog' [] v = "rUp" -> rUp'
    IN IF k = "" THEN x ELSE x[k]

\* One of the actions a step names (AckOrder!Next's disjuncts), in trace c's configuration.
Act(c, a) ==
    CASE a[1] = "Put" -> S(c)!Put
      [] a[1] = "Commit" -> S(c)!Commit
      [] a[1] = "Flush" -> S(c)!Flush
      [] a[1] = "FlushFail" -> S(c)!FlushFail
      [] a[1] = "WriteFail" -> S(c)!WriteFail
      [] a[1] = "Respond" -> a[2] \in DOMAIN reqs /\ S(c)!Respond(a[2])
      [] a[1] = "Timeout" -> a[2] \in DOMAIN reqs /\ S(c)!Timeout(a[2])
      [] a[1] = "MasterProcessCrash" -> S(c)!MasterProcessCrash
      [] a[1] = "MasterMachineCrash" -> S(c)!MasterMachineCrash
      [] a[1] = "Recover" -> S(c)!Recover
      [] a[1] = "ReplicaConnect" -> S(c)!ReplicaConnect(a[2])
      [] a[1] = "Transfer" -> S(c)!Transfer(a[2])
      [] a[1] = "ReplicaAck" -> S(c)!ReplicaAck(a[2])
      [] a[1] = "ForgedAck" -> S(c)!ForgedAck(a[2])
      [] a[1] = "ReplicaDisconnect" -> S(c)!ReplicaDisconnect(a[2])
      [] a[1] = "ReplicaCrash" -> S(c)!ReplicaCrash(a[2])
      [] a[1] = "ReplicaRestart" -> S(c)!ReplicaRestart(a[2])

ObsOK(o) ==
    CASE o.f = "eq"   -> Nxt(o.v, o.k) = o.x
      [] o.f = "app"  -> Nxt(o.v, o.k) = Cur(o.v, o.k) \o o.x
      [] o.f = "take" -> /\ o.n <= Len(Cur(o.v, o.k))
                         /\ Nxt(o.v, o.k) = SubSeq(Cur(o.v, o.k), 1, o.n) \o o.x
      [] o.f = "grow" -> /\ Len(Nxt(o.v, o.k)) = Len(Cur(o.v, o.k)) + Len(o.x)
                         /\ \A j \in 1..Len(o.x) : Nxt(o.v, o.k)[Len(Cur(o.v, o.k)) + j] = o.x[j]
      [] o.f = "fld"  -> /\ o.i \in DOMAIN reqs'
                         /\ reqs'[o.i][o.n] = o.x

\* Where a complete trace may stop: the finite reading of EveryRequestAnswered
\* and ReplicasCatchUp (nothing left waiting, every slave caught up or diverged).
EndOK(c) ==
    /\ mstate = "UP"
    /\ \A i \in DOMAIN reqs : reqs[i].status # S(c)!Waiting
    /\ \A r \in Configs[c].Replicas : S(c)!Diverged(r) \/ S(c)!CaughtUp(r)

\* The state is x (every variable but the ghosts).
StateIs(x) ==
    /\ mstate = x.mstate /\ log = x.log /\ committed = x.committed /\ flushed = x.flushed
    /\ durable = x.durable /\ writable = x.writable /\ unwritten = x.unwritten /\ landed = x.landed
    /\ reqs = x.reqs /\ connected = x.connected /\ ack = x.ack
    /\ push2SlaveMaxOffset = x.push2SlaveMaxOffset /\ syncStateSet = x.syncStateSet
    /\ rlog = x.rlog /\ rUp = x.rUp

\* p, evaluated as one expression.  In a next-state relation TLC expands \A over a set into one
\* nested call per element: EndOK over 40,000 requests overflowed its stack.  The condition of an
\* IF is evaluated, element after element.
Holds(p) == IF p THEN TRUE ELSE FALSE

\* (c is t: a bound identifier, so that the spec's constants are instantiated with constants.)
\* A segment starts at its checkpoint, the ghosts as Init has them: no guard of the bound-free
\* spec reads them (TraceView leaves them out).
TraceInit ==
    \E c \in DOMAIN Traces :
        /\ t = c
        /\ l = 1
        /\ \/ ~HasStart[c] /\ S(c)!Init
           \/ /\ HasStart[c]
              /\ StateIs(Starts[c])
              /\ inv_responses = {}
              /\ aux_ctrs = [k \in S(c)!CounterKinds |-> 0]

TraceStep ==
    \E c \in DOMAIN Traces :
        /\ c = t
        /\ l <= Len(Traces[c])
        /\ LET e == Traces[c][l] IN
             /\ \E a \in e.a : Act(c, a)
             /\ Holds(\A j \in 1..Len(e.o) : ObsOK(e.o[j]))
             /\ Holds(\A p \in e.ob \ e.m : Nxt(p[1], p[2]) = Cur(p[1], p[2]))
        /\ l' = l + 1
        /\ UNCHANGED t

\* One more level for a complete trace whose last state may be where it rests,
\* or for a segment whose last state is the next checkpoint's.
TraceEnd ==
    \E c \in DOMAIN Traces :
        /\ c = t
        /\ l = Len(Traces[c]) + 1
        /\ Holds(IF HasEnd[c] THEN StateIs(Ends[c]) ELSE Complete[c] /\ EndOK(c))
        /\ l' = l + 1
        /\ UNCHANGED <<specVars, t>>

TraceNext == TraceStep \/ TraceEnd

TraceSpec == TraceInit /\ [][TraceNext]_traceVars

\* An invariant that always holds and prints every state of the search with
\* its trace and position: the deepest position of trace t is its search depth.
Reached == PrintT(<<"ackorder-trace-reached", t, l>>)

\* An invariant that always holds and prints every state after ReportAt[t] - 1
\* explained steps of trace t: the states the report shows (ReportAt[t] = 0:
\* nothing to report for that trace).
ReportState ==
    l = ReportAt[t] =>
        PrintT(<<"ackorder-trace-state", t,
                 [mstate |-> mstate, log |-> log, committed |-> committed, flushed |-> flushed,
                  durable |-> durable, writable |-> writable, unwritten |-> unwritten, landed |-> landed,
                  reqs |-> reqs, connected |-> connected, ack |-> ack,
                  push2SlaveMaxOffset |-> push2SlaveMaxOffset, syncStateSet |-> syncStateSet,
                  rlog |-> rlog, rUp |-> rUp, inv_responses |-> {}, aux_ctrs |-> aux_ctrs]>>)

\* The ghost history and the counters are derived and read by no guard of
\* the bound-free spec: states that differ only there have the same futures.
TraceView == <<mstate, log, committed, flushed, durable, writable, unwritten, landed, reqs,
               connected, ack, push2SlaveMaxOffset, syncStateSet, rlog, rUp, l, t>>
=============================================================================
