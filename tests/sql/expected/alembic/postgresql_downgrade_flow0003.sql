BEGIN;

-- Running downgrade flow0003 -> flow0002

UPDATE flow_alembic_version SET version_num='flow0002' WHERE flow_alembic_version.version_num = 'flow0003';

COMMIT;

