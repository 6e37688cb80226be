ALTER TABLE flow.acme_task MODIFY flow_ins_id VARCHAR(64) COLLATE utf8mb4_nopad_bin NOT NULL, MODIFY task_id VARCHAR(64) COLLATE utf8mb4_nopad_bin NOT NULL;
