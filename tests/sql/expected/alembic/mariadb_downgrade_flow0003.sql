-- Running downgrade flow0003 -> flow0002

ALTER TABLE bpm_flow_repository MODIFY instant_id VARCHAR(64) NOT NULL;

ALTER TABLE bpm_flow_task MODIFY flow_ins_id VARCHAR(64) NOT NULL, MODIFY proc_def_id VARCHAR(64) NOT NULL, MODIFY task_id VARCHAR(64) NOT NULL, MODIFY source_node_code VARCHAR(64) NOT NULL, MODIFY target_node_code VARCHAR(64) NOT NULL, MODIFY assignee VARCHAR(64) NOT NULL;

UPDATE flow_alembic_version SET version_num='flow0002' WHERE flow_alembic_version.version_num = 'flow0003';

