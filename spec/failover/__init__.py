"""The Python twin of the failover spec (tla/AckOrderFailover*.tla): brokers
as peers, the controller's elections and SyncStateSet changes, epochs, the
AutoSwitch handshake and confirmOffset.  Same action and property names as
the TLA+ modules; ``ackorder twin`` explores it on the same cfgs as TLC."""
