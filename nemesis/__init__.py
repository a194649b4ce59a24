"""Faults: the Nemesis protocol (base.py), one fault per file, the registry
{name: class} (registry.py), the schedule that starts and stops them
(schedule.py), and the tool's own iptables chains (iptables.py)."""
