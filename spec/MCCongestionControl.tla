------------------------ MODULE MCCongestionControl ------------------------
(* Model checking of CongestionControl with bounds that keep it finite.     *)
(* Units are datagrams (MaxDatagramSize = 1), so windows are small numbers. *)
EXTENDS CongestionControl, TLC

CONSTANTS
    MaxPn,   \* packets per behaviour: room for two recovery periods, one after the other
    MaxPto   \* PTO expiries in a row: 1 is a tail loss probe, 2 a retransmission timeout

\* Sends stop at MaxPn and PTOs at MaxPto; everything else is the spec's Next.
MCNext == Next /\ largest_sent' <= MaxPn /\ pto_count' <= MaxPto
MCSend == Send /\ largest_sent' <= MaxPn

\* Fairness (see Fates in the spec): without it a sender could stop forever (and no
\* packet is sent while an ACK is being processed, so that processing ends).
MCSpec == Init /\ [][MCNext]_vars /\ WF_vars(MCSend) /\ WF_vars(ReduceWindow) /\ WF_vars(Fates)
          /\ WF_vars(OnAckProcessed)

RecoveryEnds == in_recovery ~> (~in_recovery \/ largest_sent = MaxPn)
=============================================================================
