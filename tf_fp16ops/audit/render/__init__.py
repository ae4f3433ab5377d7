"""Renderers: AuditReport -> text/files. They format; they never analyse."""
