"""Controller-driven failover (RocketMQ 5's controller): the sans-IO
ControllerCore, its metadata records and store."""
