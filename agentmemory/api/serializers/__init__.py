"""Request and response shapes, one module per resource, as the views are.

Validation here gives field-level 400s; the rules that belong to the domain (roles,
tool-call pairing) are the services' and are mapped back to fields by the views.
``base`` holds what every resource's serializers share: the bounds, the JSON checks,
strict request serializers and response serializers whose fields are built once.
"""
