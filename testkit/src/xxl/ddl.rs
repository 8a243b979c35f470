//! XXL-JOB's tables as each release creates them (the columns and types of
//! its `doc/db/tables_xxl_job.sql`), for the tables the importer and the
//! switch read: `xxl_job_group`, `xxl_job_info`, `xxl_job_logglue`,
//! `xxl_job_user` and `xxl_job_lock`.

/// A release whose table layout the tests build.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum XxlRelease {
    /// 2.1.0 (the layout of 2.1.x – 2.2.x): cron only (`job_cron`), the
    /// script history's times as `TIMESTAMP` (2.1.0 only), groups with an
    /// `order`; MD5 passwords.
    V2_1,
    /// 2.3.x – 2.4.x: schedule types and misfire strategies; MD5.
    V2_4,
    /// 3.x to 3.4: wider columns, users with a `token`; SHA-256 passwords
    /// from 3.2.
    V3_4,
    /// After 3.4: `name` for the job's description and the group's title,
    /// a group's own access token.
    V3_5,
}

impl XxlRelease {
    pub const ALL: [XxlRelease; 4] = [
        XxlRelease::V2_1,
        XxlRelease::V2_4,
        XxlRelease::V3_4,
        XxlRelease::V3_5,
    ];

    /// The layout name the importer reports for it.
    pub fn layout(self) -> &'static str {
        match self {
            XxlRelease::V2_1 => "2.1-2.2",
            XxlRelease::V2_4 | XxlRelease::V3_4 => "2.3-3.4",
            XxlRelease::V3_5 => "3.5",
        }
    }

    /// Whether its jobs have a schedule type (else cron only).
    pub fn typed(self) -> bool {
        self != XxlRelease::V2_1
    }

    /// The job description's column.
    pub fn desc_column(self) -> &'static str {
        if self == XxlRelease::V3_5 {
            "name"
        } else {
            "job_desc"
        }
    }

    /// The group title's column.
    pub fn title_column(self) -> &'static str {
        if self == XxlRelease::V3_5 {
            "name"
        } else {
            "title"
        }
    }

    /// The hex digest its console keeps of `password`.
    pub fn password_hash(self, password: &str) -> String {
        let hex = |d: &[u8]| d.iter().map(|b| format!("{b:02x}")).collect::<String>();
        if matches!(self, XxlRelease::V3_4 | XxlRelease::V3_5) {
            use sha2::Digest;
            hex(&sha2::Sha256::digest(password.as_bytes()))
        } else {
            use md5::Digest;
            hex(&md5::Md5::digest(password.as_bytes()))
        }
    }

    /// Its statements, in order.
    pub fn ddl(self) -> Vec<&'static str> {
        let mut all = match self {
            XxlRelease::V2_1 => vec![GROUP_2_1, INFO_2_1, LOGGLUE_2_1, USER_2_1],
            XxlRelease::V2_4 => vec![GROUP_2_4, INFO_2_4, LOGGLUE_2_4, USER_2_1],
            XxlRelease::V3_4 => vec![GROUP_3_4, INFO_3_4, LOGGLUE_2_4, USER_3_4],
            XxlRelease::V3_5 => vec![GROUP_3_5, INFO_3_5, LOGGLUE_2_4, USER_3_4],
        };
        all.extend([LOCK, LOCK_ROW]);
        all
    }
}

const GROUP_2_1: &str = "CREATE TABLE `xxl_job_group` (
  `id` int(11) NOT NULL AUTO_INCREMENT,
  `app_name` varchar(64) NOT NULL,
  `title` varchar(12) NOT NULL,
  `order` tinyint(4) NOT NULL DEFAULT '0',
  `address_type` tinyint(4) NOT NULL DEFAULT '0',
  `address_list` varchar(512) DEFAULT NULL,
  PRIMARY KEY (`id`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8";

const INFO_2_1: &str = "CREATE TABLE `xxl_job_info` (
  `id` int(11) NOT NULL AUTO_INCREMENT,
  `job_group` int(11) NOT NULL,
  `job_cron` varchar(128) NOT NULL,
  `job_desc` varchar(255) NOT NULL,
  `add_time` datetime DEFAULT NULL,
  `update_time` datetime DEFAULT NULL,
  `author` varchar(64) DEFAULT NULL,
  `alarm_email` varchar(255) DEFAULT NULL,
  `executor_route_strategy` varchar(50) DEFAULT NULL,
  `executor_handler` varchar(255) DEFAULT NULL,
  `executor_param` varchar(512) DEFAULT NULL,
  `executor_block_strategy` varchar(50) DEFAULT NULL,
  `executor_timeout` int(11) NOT NULL DEFAULT '0',
  `executor_fail_retry_count` int(11) NOT NULL DEFAULT '0',
  `glue_type` varchar(50) NOT NULL,
  `glue_source` mediumtext,
  `glue_remark` varchar(128) DEFAULT NULL,
  `glue_updatetime` datetime DEFAULT NULL,
  `child_jobid` varchar(255) DEFAULT NULL,
  `trigger_status` tinyint(4) NOT NULL DEFAULT '0',
  `trigger_last_time` bigint(13) NOT NULL DEFAULT '0',
  `trigger_next_time` bigint(13) NOT NULL DEFAULT '0',
  PRIMARY KEY (`id`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8";

const LOGGLUE_2_1: &str = "CREATE TABLE `xxl_job_logglue` (
  `id` int(11) NOT NULL AUTO_INCREMENT,
  `job_id` int(11) NOT NULL,
  `glue_type` varchar(50) DEFAULT NULL,
  `glue_source` mediumtext,
  `glue_remark` varchar(128) NOT NULL,
  `add_time` timestamp NULL DEFAULT NULL,
  `update_time` timestamp NULL DEFAULT NULL ON UPDATE CURRENT_TIMESTAMP,
  PRIMARY KEY (`id`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8";

const USER_2_1: &str = "CREATE TABLE `xxl_job_user` (
  `id` int(11) NOT NULL AUTO_INCREMENT,
  `username` varchar(50) NOT NULL,
  `password` varchar(50) NOT NULL,
  `role` tinyint(4) NOT NULL,
  `permission` varchar(255) DEFAULT NULL,
  PRIMARY KEY (`id`),
  UNIQUE KEY `i_username` (`username`) USING BTREE
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4";

const GROUP_2_4: &str = "CREATE TABLE `xxl_job_group` (
  `id` int(11) NOT NULL AUTO_INCREMENT,
  `app_name` varchar(64) NOT NULL,
  `title` varchar(12) NOT NULL,
  `address_type` tinyint(4) NOT NULL DEFAULT '0',
  `address_list` text,
  `update_time` datetime DEFAULT NULL,
  PRIMARY KEY (`id`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4";

const INFO_2_4: &str = "CREATE TABLE `xxl_job_info` (
  `id` int(11) NOT NULL AUTO_INCREMENT,
  `job_group` int(11) NOT NULL,
  `job_desc` varchar(255) NOT NULL,
  `add_time` datetime DEFAULT NULL,
  `update_time` datetime DEFAULT NULL,
  `author` varchar(64) DEFAULT NULL,
  `alarm_email` varchar(255) DEFAULT NULL,
  `schedule_type` varchar(50) NOT NULL DEFAULT 'NONE',
  `schedule_conf` varchar(128) DEFAULT NULL,
  `misfire_strategy` varchar(50) NOT NULL DEFAULT 'DO_NOTHING',
  `executor_route_strategy` varchar(50) DEFAULT NULL,
  `executor_handler` varchar(255) DEFAULT NULL,
  `executor_param` varchar(512) DEFAULT NULL,
  `executor_block_strategy` varchar(50) DEFAULT NULL,
  `executor_timeout` int(11) NOT NULL DEFAULT '0',
  `executor_fail_retry_count` int(11) NOT NULL DEFAULT '0',
  `glue_type` varchar(50) NOT NULL,
  `glue_source` mediumtext,
  `glue_remark` varchar(128) DEFAULT NULL,
  `glue_updatetime` datetime DEFAULT NULL,
  `child_jobid` varchar(255) DEFAULT NULL,
  `trigger_status` tinyint(4) NOT NULL DEFAULT '0',
  `trigger_last_time` bigint(13) NOT NULL DEFAULT '0',
  `trigger_next_time` bigint(13) NOT NULL DEFAULT '0',
  PRIMARY KEY (`id`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4";

const LOGGLUE_2_4: &str = "CREATE TABLE `xxl_job_logglue` (
  `id` int(11) NOT NULL AUTO_INCREMENT,
  `job_id` int(11) NOT NULL,
  `glue_type` varchar(50) DEFAULT NULL,
  `glue_source` mediumtext,
  `glue_remark` varchar(128) NOT NULL,
  `add_time` datetime DEFAULT NULL,
  `update_time` datetime DEFAULT NULL,
  PRIMARY KEY (`id`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4";

const GROUP_3_4: &str = "CREATE TABLE `xxl_job_group` (
  `id` int(11) NOT NULL AUTO_INCREMENT,
  `app_name` varchar(64) NOT NULL,
  `title` varchar(64) NOT NULL,
  `address_type` tinyint(4) NOT NULL DEFAULT '0',
  `address_list` text,
  `update_time` datetime DEFAULT NULL,
  PRIMARY KEY (`id`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4";

const INFO_3_4: &str = "CREATE TABLE `xxl_job_info` (
  `id` int(11) NOT NULL AUTO_INCREMENT,
  `job_group` int(11) NOT NULL,
  `job_desc` varchar(255) NOT NULL,
  `add_time` datetime DEFAULT NULL,
  `update_time` datetime DEFAULT NULL,
  `author` varchar(64) DEFAULT NULL,
  `alarm_email` varchar(255) DEFAULT NULL,
  `schedule_type` varchar(50) NOT NULL DEFAULT 'NONE',
  `schedule_conf` varchar(128) DEFAULT NULL,
  `misfire_strategy` varchar(50) NOT NULL DEFAULT 'DO_NOTHING',
  `executor_route_strategy` varchar(50) DEFAULT NULL,
  `executor_handler` varchar(255) DEFAULT NULL,
  `executor_param` text DEFAULT NULL,
  `executor_block_strategy` varchar(50) DEFAULT NULL,
  `executor_timeout` int(11) NOT NULL DEFAULT '0',
  `executor_fail_retry_count` int(11) NOT NULL DEFAULT '0',
  `glue_type` varchar(50) NOT NULL,
  `glue_source` mediumtext,
  `glue_remark` varchar(128) DEFAULT NULL,
  `glue_updatetime` datetime DEFAULT NULL,
  `child_jobid` varchar(255) DEFAULT NULL,
  `trigger_status` tinyint(4) NOT NULL DEFAULT '0',
  `trigger_last_time` bigint(13) NOT NULL DEFAULT '0',
  `trigger_next_time` bigint(13) NOT NULL DEFAULT '0',
  PRIMARY KEY (`id`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4";

const USER_3_4: &str = "CREATE TABLE `xxl_job_user` (
  `id` int(11) NOT NULL AUTO_INCREMENT,
  `username` varchar(50) NOT NULL,
  `password` varchar(100) NOT NULL,
  `token` varchar(100) DEFAULT NULL,
  `role` tinyint(4) NOT NULL,
  `permission` varchar(255) DEFAULT NULL,
  PRIMARY KEY (`id`),
  UNIQUE KEY `i_username` (`username`) USING BTREE
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4";

const GROUP_3_5: &str = "CREATE TABLE `xxl_job_group` (
  `id` INT NOT NULL AUTO_INCREMENT,
  `app_name` VARCHAR(64) NOT NULL,
  `name` VARCHAR(64) NOT NULL,
  `address_type` TINYINT NOT NULL DEFAULT 0,
  `address_list` TEXT DEFAULT NULL,
  `access_token` VARCHAR(255) DEFAULT NULL,
  `update_time` DATETIME DEFAULT NULL,
  PRIMARY KEY (`id`),
  UNIQUE KEY `i_app_name` (`app_name`) USING BTREE
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4";

const INFO_3_5: &str = "CREATE TABLE `xxl_job_info` (
  `id` INT NOT NULL AUTO_INCREMENT,
  `job_group` INT NOT NULL,
  `name` VARCHAR(255) NOT NULL,
  `author` VARCHAR(64) DEFAULT NULL,
  `alarm_email` VARCHAR(255) DEFAULT NULL,
  `schedule_type` VARCHAR(50) NOT NULL DEFAULT 'NONE',
  `schedule_conf` VARCHAR(128) DEFAULT NULL,
  `misfire_strategy` VARCHAR(50) NOT NULL DEFAULT 'DO_NOTHING',
  `executor_route_strategy` VARCHAR(50) DEFAULT NULL,
  `executor_handler` VARCHAR(255) DEFAULT NULL,
  `executor_param` TEXT DEFAULT NULL,
  `executor_block_strategy` VARCHAR(50) DEFAULT NULL,
  `executor_timeout` INT NOT NULL DEFAULT 0,
  `executor_fail_retry_count` INT NOT NULL DEFAULT 0,
  `glue_type` VARCHAR(50) NOT NULL,
  `glue_source` MEDIUMTEXT DEFAULT NULL,
  `glue_remark` VARCHAR(128) DEFAULT NULL,
  `glue_updatetime` DATETIME DEFAULT NULL,
  `child_jobid` VARCHAR(255) DEFAULT NULL,
  `trigger_status` TINYINT NOT NULL DEFAULT 0,
  `trigger_last_time` BIGINT NOT NULL DEFAULT 0,
  `trigger_next_time` BIGINT NOT NULL DEFAULT 0,
  `add_time` DATETIME DEFAULT NULL,
  `update_time` DATETIME DEFAULT NULL,
  PRIMARY KEY (`id`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4";

const LOCK: &str = "CREATE TABLE `xxl_job_lock` (
  `lock_name` varchar(50) NOT NULL,
  PRIMARY KEY (`lock_name`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4";

const LOCK_ROW: &str = "INSERT INTO `xxl_job_lock` (`lock_name`) VALUES ('schedule_lock')";
