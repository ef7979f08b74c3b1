--------------------------- MODULE AckOrderTrace ---------------------------
(***************************************************************************)
(* Trace validation (CCF / etcd style): the behaviours of the bound-free  *)
(* spec (AckOrder, every bug switch off) that match an implementation     *)
(* trace step by step.  `ackorder trace-check` writes the trace as the     *)
(* literal sequence Trace of a generated module AckOrderTraceData (TLC     *)
(* 2.15 reads no JSON), with the configuration in a generated cfg.         *)
(*                                                                         *)
(* Each element of Trace is one spec step:                                *)
(*   a  : the actions that may explain it, <<name, parameter>> pairs      *)
(*   o  : observations of the new state, each linear in what changed:     *)
(*          [f |-> "eq",   v, k, x]  the variable (entry k) is now x       *)
(*          [f |-> "app",  v, k, x]  ... is what it was with x appended    *)
(*          [f |-> "take", v, k, n, x] its first n elements, then x        *)
(*          [f |-> "grow", v, k, x]  longer by x, which ends it (reqs)     *)
(*          [f |-> "fld",  v, k, i, n, x] reqs'[i][n] = x                  *)
(*   m  : the (variable, entry) pairs the observations mention            *)
(*   ob : the pairs the writing process observes; those it observes and   *)
(*        does not mention are unchanged, the others TLC searches          *)
(* Entry k is "" for a whole variable, or a replica of a per-replica one. *)
(*                                                                         *)
(* TraceMatched is violated exactly when some behaviour explains every    *)
(* step (and, for a trace that claims to be complete, ends where nothing  *)
(* is left waiting): TLC's counterexample is then the witness.  When it   *)
(* holds, the search depth says how many steps were explained, and a      *)
(* second run with Unexplained shows a state before the first step no    *)
(* spec step explains.                                                    *)
(***************************************************************************)
EXTENDS AckOrderProperties, AckOrderTraceData

VARIABLE l      \* the position in Trace of the next step to explain

traceVars == <<vars, l>>

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

\* One of the actions a step names (AckOrder!Next's disjuncts).
Act(a) ==
    CASE a[1] = "Put" -> Put
      [] a[1] = "Commit" -> Commit
      [] a[1] = "Flush" -> Flush
      [] a[1] = "FlushFail" -> FlushFail
      [] a[1] = "WriteFail" -> WriteFail
      [] a[1] = "Respond" -> a[2] \in DOMAIN reqs /\ Respond(a[2])
      [] a[1] = "Timeout" -> a[2] \in DOMAIN reqs /\ Timeout(a[2])
      [] a[1] = "MasterProcessCrash" -> MasterProcessCrash
      [] a[1] = "MasterMachineCrash" -> MasterMachineCrash
      [] a[1] = "Recover" -> Recover
      [] a[1] = "ReplicaConnect" -> ReplicaConnect(a[2])
      [] a[1] = "Transfer" -> Transfer(a[2])
      [] a[1] = "ReplicaAck" -> ReplicaAck(a[2])
      [] a[1] = "ForgedAck" -> ForgedAck(a[2])
      [] a[1] = "ReplicaDisconnect" -> ReplicaDisconnect(a[2])
      [] a[1] = "ReplicaCrash" -> ReplicaCrash(a[2])
      [] a[1] = "ReplicaRestart" -> ReplicaRestart(a[2])

ObsOK(o) ==
    CASE o.f = "eq"   -> Nxt(o.v, o.k) = o.x
      [] o.f = "app"  -> Nxt(o.v, o.k) = Cur(o.v, o.k) \o o.x
      [] o.f = "take" -> /\ o.n <= Len(Cur(o.v, o.k))
                         /\ Nxt(o.v, o.k) = SubSeq(Cur(o.v, o.k), 1, o.n) \o o.x
      [] o.f = "grow" -> /\ Len(Nxt(o.v, o.k)) = Len(Cur(o.v, o.k)) + Len(o.x)
                         /\ \A j \in 1..Len(o.x) : Nxt(o.v, o.k)[Len(Cur(o.v, o.k)) + j] = o.x[j]
      [] o.f = "fld"  -> /\ o.i \in DOMAIN reqs'
                         /\ reqs'[o.i][o.n] = o.x

TraceInit == Init /\ l = 1

TraceNext ==
    /\ l <= Len(Trace)
    /\ LET e == Trace[l] IN
         /\ \E a \in e.a : Act(a)
         /\ \A j \in 1..Len(e.o) : ObsOK(e.o[j])
         /\ \A p \in e.ob \ e.m : Nxt(p[1], p[2]) = Cur(p[1], p[2])
    /\ l' = l + 1

TraceSpec == TraceInit /\ [][TraceNext]_traceVars

\* Where a complete trace may stop: the finite reading of EveryRequestAnswered
\* and ReplicasCatchUp (nothing left waiting, every slave caught up or diverged).
EndOK ==
    /\ mstate = "UP"
    /\ \A i \in DOMAIN reqs : reqs[i].status # Waiting
    /\ \A r \in Replicas : Diverged(r) \/ CaughtUp(r)

\* Violated exactly when a behaviour of the spec explains the whole trace.
TraceMatched == ~(l = Len(Trace) + 1 /\ (TraceComplete => EndOK))

\* Violated at the first state after ReportAt - 1 explained steps (the report's state).
Unexplained == l < ReportAt

\* The ghost history and the counters are derived and read by no guard of
\* the bound-free spec: states that differ only there have the same futures.
TraceView == <<mstate, log, committed, flushed, durable, writable, unwritten, landed, reqs,
               connected, ack, push2SlaveMaxOffset, syncStateSet, rlog, rUp, l>>
=============================================================================
